// Package flatjson reads flat JSON objects (string, number, boolean and null values, one level of
// nested objects, no arrays, no escapes or dots in keys) without reflection, for hot decoding
// paths. Anything else is reported as not handled, so the caller falls back to encoding/json: the
// fast path never guesses.
package flatjson

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is what a member's value is.
type Kind uint8

const (
	// Literal is a number, true, false or null: the value is its text.
	Literal Kind = iota
	// String is a string written without escapes: the value is its contents.
	String
	// Escaped is a string written with escapes: the value is its contents unescaped as
	// encoding/json does (a decoder handed the raw JSON text, such as time.Time's UnmarshalJSON,
	// would read it differently).
	Escaped
	// Object announces a nested object: the value is "{", and its members follow.
	Object
)

// IsString reports whether k is a string, escaped or not.
func (k Kind) IsString() bool { return k == String || k == Escaped }

// Each calls fn for every member of the object in b, in order, with the key, the value and its
// kind. A nested object is announced as its key with kind Object, then its members come as
// "outer.inner" keys. It returns false, having possibly called fn for some members, when b is not
// an object it handles; the caller must then decode b another way and discard what fn saw.
func Each(b []byte, fn func(key, val []byte, kind Kind)) bool {
	i, ok := object(b, 0, nil, fn)
	return ok && skip(b, i) == len(b)
}

// object reads the object starting at b[skip(i)]; prefix is nil at the top level, where a member
// may itself be an object.
func object(b []byte, i int, prefix []byte, fn func(key, val []byte, kind Kind)) (int, bool) {
	i = skip(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skip(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		key, _, j, ok := str(b, i, false)
		if !ok || bytes.IndexByte(key, '.') >= 0 {
			return 0, false // a dot would make "outer.inner" ambiguous
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
			fn(key, []byte("{"), Object)
			if j, ok = object(b, i, key, fn); !ok {
				return 0, false
			}
		case b[i] == '"':
			var val []byte
			var escaped bool
			if val, escaped, j, ok = str(b, i, true); !ok {
				return 0, false
			}
			if escaped {
				fn(key, val, Escaped)
			} else {
				fn(key, val, String)
			}
		default:
			var val []byte
			if val, j, ok = literal(b, i); !ok {
				return 0, false
			}
			fn(key, val, Literal)
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

// str reads a string starting at b[i] == '"' and returns its contents and whether it held escapes:
// unescaped when esc allows escapes (a new slice only then), refused when it holds one and esc
// does not. Control characters and invalid UTF-8 are refused (encoding/json replaces invalid
// UTF-8 with U+FFFD).
func str(b []byte, i int, esc bool) ([]byte, bool, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, false, 0, false
	}
	high, escaped := false, false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if high && !utf8.Valid(s) {
				return nil, false, 0, false
			}
			if escaped {
				var ok bool
				if s, ok = unescape(s); !ok {
					return nil, false, 0, false
				}
			}
			return s, escaped, j + 1, true
		case c == '\\':
			if !esc {
				return nil, false, 0, false
			}
			escaped = true
			j++ // the escaped byte cannot end the string; unescape checks it
		case c < 0x20:
			return nil, false, 0, false
		case c >= 0x80:
			high = true
		}
	}
	return nil, false, 0, false
}

// unescape decodes the escapes of a JSON string's contents as encoding/json does: a surrogate
// \u escape not followed by its pair reads as U+FFFD. It refuses any escape JSON does not define.
func unescape(s []byte) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for k := 0; k < len(s); {
		c := s[k]
		if c != '\\' {
			out = append(out, c)
			k++
			continue
		}
		if k+1 >= len(s) {
			return nil, false
		}
		switch e := s[k+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s, k)
			if !ok {
				return nil, false
			}
			k += 6
			if utf16.IsSurrogate(r) {
				r2, ok := hex4(s, k)
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					k += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, false
		}
		k += 2
	}
	return out, true
}

// hex4 reads the \uXXXX escape at s[k:].
func hex4(s []byte, k int) (rune, bool) {
	if k+6 > len(s) || s[k] != '\\' || s[k+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range s[k+2 : k+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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

// MayName reports whether encoding/json could read a member whose key is written key (the bytes
// between its quotes) into a field named name, an ASCII name. encoding/json matches names without
// regard to case, Unicode folding included, so any key outside ASCII counts, as does one written
// with an escape; otherwise the key must equal name in ASCII case folding.
func MayName(key []byte, name string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf || c == '\\' {
			return true
		}
	}
	if len(key) != len(name) {
		return false
	}
	for i, c := range key {
		if lower(c) != lower(name[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
