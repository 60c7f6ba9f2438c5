package querymodel

import (
	"encoding/json"
	"strconv"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/flatjson"
)

// decodeMeta reads the metadata fields the query model uses. Flat, escape-free metadata (what
// Casebook writes) takes a reflection-free path; anything else goes through encoding/json, and
// TestFastDecodeMatchesJSON checks the two agree.
func decodeMeta(b []byte) (domain.Metadata, error) {
	var m domain.Metadata
	var at []byte
	bad := false
	ok := flatjson.Each(b, func(k, v []byte, str bool) {
		switch string(k) {
		case "tenant_id":
			m.TenantID, bad = domain.TenantID(v), bad || !str
		case "actor":
			m.Actor, bad = domain.PrincipalID(v), bad || !str
		case "occurred_at":
			at, bad = v, bad || !str
		case "schema_version":
			n, err := strconv.Atoi(string(v))
			m.SchemaVersion, bad = n, bad || str || err != nil
		case "command_id":
			m.CommandID, bad = string(v), bad || !str
		case "idempotency_key", "request_hash", "correlation_id":
		default:
			bad = true // encoding/json matches keys case-insensitively: let it decide
		}
	})
	if ok && !bad && at != nil {
		// UnmarshalText is the RFC 3339 parse encoding/json uses for time.Time.
		if err := m.OccurredAt.UnmarshalText(at); err == nil {
			return m, nil
		}
	}
	m = domain.Metadata{}
	err := json.Unmarshal(b, &m)
	return m, err
}

// decodeEvent decodes the flat event types without reflection and defers everything else (and
// every other schema version) to domain.Decode.
func decodeEvent(typ string, schemaVersion int, data []byte) (domain.Event, error) {
	if schemaVersion != domain.SchemaVersion {
		return domain.Decode(typ, schemaVersion, data)
	}
	bad := false
	// text reads a string member; null keeps the current value, as encoding/json does.
	text := func(v []byte, str bool, cur string) string {
		if !str {
			bad = bad || string(v) != "null"
			return cur
		}
		return string(v)
	}
	var ev domain.Event
	var ok bool
	switch typ {
	case "InquiryTriaged":
		var e domain.InquiryTriaged
		ok = flatjson.Each(data, func(k, v []byte, str bool) {
			switch string(k) {
			case "priority":
				e.Priority = domain.Priority(text(v, str, string(e.Priority)))
			default:
				bad = true // encoding/json matches keys case-insensitively: let it decide
			}
		})
		ev = e
	case "InquiryStatusChanged":
		var e domain.InquiryStatusChanged
		ok = flatjson.Each(data, func(k, v []byte, str bool) {
			switch string(k) {
			case "from":
				e.From = domain.Status(text(v, str, string(e.From)))
			case "to":
				e.To = domain.Status(text(v, str, string(e.To)))
			case "reason":
				e.Reason = text(v, str, e.Reason)
			default:
				bad = true
			}
		})
		ev = e
	case "InquiryAssigned":
		var e domain.InquiryAssigned
		ok = flatjson.Each(data, func(k, v []byte, str bool) {
			switch string(k) {
			case "owner":
				e.Owner = domain.PrincipalID(text(v, str, string(e.Owner)))
			case "previous":
				e.Previous = domain.PrincipalID(text(v, str, string(e.Previous)))
			case "team":
				e.Team = text(v, str, e.Team)
			default:
				bad = true
			}
		})
		ev = e
	case "InquiryReceived":
		var e domain.InquiryReceived
		ok = flatjson.Each(data, func(k, v []byte, str bool) {
			switch string(k) {
			case "inquiry_id":
				e.InquiryID = domain.InquiryID(text(v, str, string(e.InquiryID)))
			case "tenant_id":
				e.TenantID = domain.TenantID(text(v, str, string(e.TenantID)))
			case "source":
				e.Source = domain.Source(text(v, str, string(e.Source)))
			case "receipt":
				e.Receipt = text(v, str, e.Receipt)
			case "requester":
				bad = bad || str || string(v) != "{" // an object, read member by member below
			case "requester.name":
				e.Requester.Name = text(v, str, e.Requester.Name)
			case "requester.email":
				e.Requester.Email = text(v, str, e.Requester.Email)
			case "subject":
				e.Subject = text(v, str, e.Subject)
			case "message":
				e.Message = text(v, str, e.Message)
			case "category":
				e.Category = text(v, str, e.Category)
			case "priority":
				e.Priority = domain.Priority(text(v, str, string(e.Priority)))
			default:
				bad = true
			}
		})
		ev = e
	case "NoteAdded":
		var e domain.NoteAdded
		ok = flatjson.Each(data, func(k, v []byte, str bool) {
			switch string(k) {
			case "body":
				e.Body = text(v, str, e.Body)
			default:
				bad = true
			}
		})
		ev = e
	}
	if ok && !bad {
		return ev, nil
	}
	return domain.Decode(typ, schemaVersion, data)
}
