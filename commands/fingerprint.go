package commands

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"unicode/utf8"

	"github.com/casebook/casebook/domain"
)

// fingerprintEncoding writes fingerprints: base32 without padding.
var fingerprintEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// fingerprint hashes a request's fields for idempotency comparisons: the first 16 bytes of the
// SHA-256 of json.Marshal(parts), in base32. Fingerprints are stored with the events they
// guard, so the bytes hashed must never change: appendParts writes the common part types
// itself, byte for byte as json.Marshal does (FuzzFingerprintMatchesJSON), and every other
// type goes through json.Marshal.
func fingerprint(parts ...any) string {
	var buf [512]byte
	b, ok := appendParts(buf[:0], parts)
	if !ok {
		b, _ = json.Marshal(parts)
	}
	sum := sha256.Sum256(b)
	return fingerprintEncoding.EncodeToString(sum[:16])
}

// appendParts appends parts as a JSON array, as json.Marshal writes it, or reports false when a
// part is of a type it does not write.
func appendParts(b []byte, parts []any) ([]byte, bool) {
	if parts == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		switch v := p.(type) {
		case string:
			b = appendJSONString(b, v)
		case domain.Source:
			b = appendJSONString(b, string(v))
		case domain.PrincipalID:
			b = appendJSONString(b, string(v))
		case domain.Requester:
			b = append(b, `{"name":`...)
			b = appendJSONString(b, v.Name)
			b = append(b, `,"email":`...)
			b = appendJSONString(b, v.Email)
			if v.SlackUser != "" {
				b = append(b, `,"slack_user":`...)
				b = appendJSONString(b, v.SlackUser)
			}
			b = append(b, '}')
		case nil:
			b = append(b, "null"...)
		default:
			return b, false
		}
	}
	return append(b, ']'), true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json's Marshal writes a string: HTML-safe (<, > and &
// escaped), invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
