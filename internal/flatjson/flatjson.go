// Package flatjson reads flat JSON objects (string, number, boolean and null values, one level of
// nested objects, no arrays, no escapes in strings) without reflection, for hot decoding paths.
// Anything else is reported as not handled, so the caller falls back to encoding/json: the fast
// path never guesses.
package flatjson

import "unicode/utf8"

// Each calls fn for every member of the object in b, in order, with the key and the value: a
// string's contents without quotes, or the literal text of a number, true, false or null (str
// tells which). A nested object is announced as its key with the value "{" (str false), then its
// members come as "outer.inner" keys. It returns false, having
// possibly called fn for some members, when b is not an object it handles; the caller must then
// decode b another way and discard what fn saw.
func Each(b []byte, fn func(key, val []byte, str bool)) bool {
	i, ok := object(b, 0, nil, fn)
	return ok && skip(b, i) == len(b)
}

// object reads the object starting at b[skip(i)]; prefix is nil at the top level, where a member
// may itself be an object.
func object(b []byte, i int, prefix []byte, fn func(key, val []byte, str bool)) (int, bool) {
	i = skip(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skip(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		key, j, ok := str(b, i)
		if !ok {
			return 0, false
		}
		if prefix != nil {
			key = append(append(append([]byte(nil), prefix...), '.'), key...)
		}
		i = skip(b, j)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skip(b, i+1)
		if i >= len(b) {
			return 0, false
		}
		switch {
		case b[i] == '{' && prefix == nil:
			fn(key, []byte("{"), false)
			if j, ok = object(b, i, key, fn); !ok {
				return 0, false
			}
		case b[i] == '"':
			var val []byte
			if val, j, ok = str(b, i); !ok {
				return 0, false
			}
			fn(key, val, true)
		default:
			var val []byte
			if val, j, ok = literal(b, i); !ok {
				return 0, false
			}
			fn(key, val, false)
		}
		i = skip(b, j)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skip(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func skip(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// str reads a string without escapes or control characters starting at b[i] == '"'. Invalid UTF-8
// is not handled (encoding/json replaces it with U+FFFD).
func str(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	high := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if high && !utf8.Valid(b[i+1:j]) {
				return nil, 0, false
			}
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			high = true
		}
	}
	return nil, 0, false
}

// literal reads a number, true, false or null.
func literal(b []byte, i int) ([]byte, int, bool) {
	j := i
	for j < len(b) {
		c := b[j]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || (c >= 'a' && c <= 'z') {
			j++
			continue
		}
		break
	}
	if j == i {
		return nil, 0, false
	}
	v := string(b[i:j])
	if v != "true" && v != "false" && v != "null" && !number(v) {
		return nil, 0, false
	}
	return b[i:j], j, true
}

// number reports whether v is a JSON number (RFC 8259 section 6): no leading zeros, no plus sign,
// digits on both sides of a point.
func number(v string) bool {
	digits := func(i int) int {
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && v[i] >= '1' && v[i] <= '9':
		i = digits(i)
	default:
		return false
	}
	if i < len(v) && v[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(v)
}
