package commands

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"

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
			b = domain.AppendJSONString(b, v)
		case domain.Source:
			b = domain.AppendJSONString(b, string(v))
		case domain.PrincipalID:
			b = domain.AppendJSONString(b, string(v))
		case domain.Requester:
			b = append(b, `{"name":`...)
			b = domain.AppendJSONString(b, v.Name)
			b = append(b, `,"email":`...)
			b = domain.AppendJSONString(b, v.Email)
			if v.SlackUser != "" {
				b = append(b, `,"slack_user":`...)
				b = domain.AppendJSONString(b, v.SlackUser)
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
