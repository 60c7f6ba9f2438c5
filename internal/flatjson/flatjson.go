// Package flatjson reads flat JSON objects (string, number, boolean and null values, no nesting,
// no escapes in strings) without reflection, for hot decoding paths. Anything else is reported as
// not handled, so the caller falls back to encoding/json: the fast path never guesses.
package flatjson

// Each calls fn for every member of the object in b, in order, with the key and the value: a
// string's contents without quotes, or the literal text of a number, true, false or null (str
// tells which). It returns false, having possibly called fn for some members, when b is not a
// flat object it handles; the caller must then decode b another way and discard what fn saw.
func Each(b []byte, fn func(key, val []byte, str bool)) bool {
	i := skip(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skip(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skip(b, i+1) == len(b)
	}
	for {
		key, j, ok := str(b, i)
		if !ok {
			return false
		}
		i = skip(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skip(b, i+1)
		if i >= len(b) {
			return false
		}
		var val []byte
		isStr := b[i] == '"'
		if isStr {
			if val, j, ok = str(b, i); !ok {
				return false
			}
		} else if val, j, ok = literal(b, i); !ok {
			return false
		}
		fn(key, val, isStr)
		i = skip(b, j)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skip(b, i+1)
		case '}':
			return skip(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skip(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// str reads a string without escapes or control characters starting at b[i] == '"'.
func str(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
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
	switch {
	case v == "true" || v == "false" || v == "null":
	case (v[0] >= '0' && v[0] <= '9') || v[0] == '-':
		for k := 0; k < len(v); k++ {
			if v[k] >= 'a' && v[k] <= 'z' && v[k] != 'e' {
				return nil, 0, false
			}
		}
	default:
		return nil, 0, false
	}
	return b[i:j], j, true
}
