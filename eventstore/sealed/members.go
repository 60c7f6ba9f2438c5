package sealed

import (
	"bytes"
	"encoding/json"
	"errors"
)

// errShape is a payload that is not a JSON object.
var errShape = errors.New("sealed: not a JSON object")

// member is one top-level member of a JSON object: its key as written between the quotes, and
// the member's bytes (key, colon and value).
type member struct{ key, raw []byte }

// members splits a JSON object into its top-level members without decoding any value. It checks
// the structure (strings, nesting, separators), not the syntax of scalars: a reader that decodes
// the result still sees every malformed value. It allocates only the returned slice.
func members(data []byte, out []member) ([]member, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, errShape
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return out, rest(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, errShape
		}
		start := i
		end, err := skipString(data, i)
		if err != nil {
			return nil, err
		}
		key := data[start+1 : end-1]
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, errShape
		}
		if i, err = skipValue(data, skipSpace(data, i+1)); err != nil {
			return nil, err
		}
		out = append(out, member{key: key, raw: data[start:i]})
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, errShape
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return out, rest(data, i+1)
		default:
			return nil, errShape
		}
	}
}

// rest checks that only white space follows the object.
func rest(data []byte, i int) error {
	if skipSpace(data, i) != len(data) {
		return errShape
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at data[i] (a quote).
func skipString(data []byte, i int) (int, error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errShape
}

// skipValue returns the index after the value that starts at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errShape
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errShape
	}
	j := i
scalar:
	for ; j < len(data); j++ {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			break scalar
		}
	}
	if j == i {
		return 0, errShape
	}
	return j, nil
}

// plainKey reports whether a key as written is exactly its decoded text (no escapes), so raw
// bytes can be compared with a member name.
func plainKey(key []byte) bool { return bytes.IndexByte(key, '\\') < 0 }

// stringValue decodes a member's value as a JSON string; printable ASCII without escapes (the
// common form) is read without decoding.
func stringValue(m member) (string, error) {
	v := m.raw[len(m.key)+2:]
	v = v[skipSpace(v, 0):]
	v = v[1:] // the colon
	v = v[skipSpace(v, 0):]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && plainASCII(v[1:len(v)-1]) {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// plainASCII reports whether b is printable ASCII without quotes or backslashes: JSON string
// content that decodes to itself.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
