package eventstore

import (
	"encoding/json"
	"strconv"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/flatjson"
)

// DecodeMetadata decodes an event's metadata exactly as encoding/json decodes it into
// domain.Metadata. Flat metadata with the members Casebook writes (what every event carries)
// takes a reflection-free path; anything else, such as a key in another case, goes through
// encoding/json. TestDecodeMetadataMatchesJSON and FuzzDecodeMetadata check that the two agree.
func DecodeMetadata(b []byte) (domain.Metadata, error) {
	if m, ok := fastMetadata(b); ok {
		return m, nil
	}
	var m domain.Metadata
	err := json.Unmarshal(b, &m)
	return m, err
}

// fastMetadata is DecodeMetadata's reflection-free path; false when b needs encoding/json.
func fastMetadata(b []byte) (domain.Metadata, bool) {
	var m domain.Metadata
	var at []byte
	bad := false
	text := func(v []byte, kind flatjson.Kind) string {
		bad = bad || !kind.IsString()
		return string(v)
	}
	ok := flatjson.Each(b, func(k, v []byte, kind flatjson.Kind) {
		switch string(k) {
		case "tenant_id":
			m.TenantID = domain.TenantID(text(v, kind))
		case "actor":
			m.Actor = domain.PrincipalID(text(v, kind))
		case "command_id":
			m.CommandID = text(v, kind)
		case "idempotency_key":
			m.IdempotencyKey = text(v, kind)
		case "request_hash":
			m.RequestHash = text(v, kind)
		case "correlation_id":
			m.CorrelationID = text(v, kind)
		case "occurred_at":
			// time.Time's UnmarshalJSON reads the raw text, escapes included.
			at, bad = v, bad || kind != flatjson.String
		case "schema_version":
			n, err := strconv.Atoi(string(v))
			m.SchemaVersion, bad = n, bad || kind != flatjson.Literal || err != nil
		default:
			bad = true // encoding/json matches keys case-insensitively: let it decide
		}
	})
	if ok && !bad && at != nil {
		// UnmarshalText is the RFC 3339 parse time.Time's UnmarshalJSON uses.
		if err := m.OccurredAt.UnmarshalText(at); err == nil {
			return m, true
		}
	}
	return domain.Metadata{}, false
}
