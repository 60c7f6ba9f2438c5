package querymodel

import (
	"encoding/json"
	"strconv"
	"time"

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
		case "command_id", "idempotency_key", "request_hash", "correlation_id":
		default:
			bad = true // encoding/json matches keys case-insensitively: let it decide
		}
	})
	if ok && !bad && at != nil {
		t, err := time.Parse(time.RFC3339Nano, string(at))
		if err == nil {
			m.OccurredAt = t
			return m, nil
		}
	}
	m = domain.Metadata{}
	err := json.Unmarshal(b, &m)
	return m, err
}

// eventKeys are the JSON keys of the flat event types.
var eventKeys = map[string]map[string]bool{
	"InquiryTriaged":       {"priority": true},
	"InquiryStatusChanged": {"from": true, "to": true, "reason": true},
	"InquiryAssigned":      {"owner": true, "previous": true, "team": true},
	"NoteAdded":            {"body": true},
}

// decodeEvent decodes the flat event types without reflection and defers everything else (and
// every other schema version) to domain.Decode.
func decodeEvent(typ string, schemaVersion int, data []byte) (domain.Event, error) {
	if schemaVersion == domain.SchemaVersion {
		fields := map[string]string{}
		bad := false
		known := eventKeys[typ]
		ok := known != nil && flatjson.Each(data, func(k, v []byte, str bool) {
			if !known[string(k)] {
				bad = true // encoding/json matches keys case-insensitively: let it decide
			}
			if v := string(v); str {
				fields[string(k)] = v
			} else if v != "null" {
				bad = true
			}
		})
		if ok && !bad {
			switch typ {
			case "InquiryTriaged":
				return domain.InquiryTriaged{Priority: domain.Priority(fields["priority"])}, nil
			case "InquiryStatusChanged":
				return domain.InquiryStatusChanged{From: domain.Status(fields["from"]), To: domain.Status(fields["to"]), Reason: fields["reason"]}, nil
			case "InquiryAssigned":
				return domain.InquiryAssigned{Owner: domain.PrincipalID(fields["owner"]), Previous: domain.PrincipalID(fields["previous"]), Team: fields["team"]}, nil
			case "NoteAdded":
				return domain.NoteAdded{Body: fields["body"]}, nil
			}
		}
	}
	return domain.Decode(typ, schemaVersion, data)
}
