package eventstore

import (
	"bytes"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/flatjson"
)

// DecodeEvent decodes an event's data exactly as domain.Decode does. The flat event types at the
// current schema version take a reflection-free path; anything else goes through domain.Decode.
// TestFastDecodeMatchesJSON and FuzzFastDecodeMatchesJSON check that the two agree.
func DecodeEvent(typ string, schemaVersion int, data []byte) (domain.Event, error) {
	if schemaVersion == domain.SchemaVersion {
		if ev, ok := fastEvent(typ, data); ok {
			return ev, nil
		}
	}
	return domain.Decode(typ, schemaVersion, data)
}

// fastEvent is DecodeEvent's reflection-free path for the current schema version; false when data
// needs domain.Decode.
func fastEvent(typ string, data []byte) (domain.Event, bool) {
	bad := false
	// text reads a string member; null keeps the current value, as encoding/json does.
	text := func(v []byte, kind flatjson.Kind, cur string) string {
		if !kind.IsString() {
			bad = bad || string(v) != "null"
			return cur
		}
		return string(v)
	}
	// other is a member the type has no field for: encoding/json ignores it unless its name
	// matches a field in another case (Unicode folding included, so any name outside ASCII
	// counts).
	other := func(k []byte, fields ...string) {
		for _, c := range k {
			if c >= 0x80 {
				bad = true
				return
			}
		}
		for _, f := range fields {
			if bytes.EqualFold(k, []byte(f)) {
				bad = true
				return
			}
		}
	}
	var ev domain.Event
	var ok bool
	switch typ {
	case "InquiryTriaged":
		var e domain.InquiryTriaged
		ok = flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
			switch string(k) {
			case "priority":
				e.Priority = domain.Priority(text(v, kind, string(e.Priority)))
			default:
				other(k, "priority")
			}
		})
		ev = e
	case "InquiryStatusChanged":
		var e domain.InquiryStatusChanged
		ok = flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
			switch string(k) {
			case "from":
				e.From = domain.Status(text(v, kind, string(e.From)))
			case "to":
				e.To = domain.Status(text(v, kind, string(e.To)))
			case "reason":
				e.Reason = text(v, kind, e.Reason)
			default:
				other(k, "from", "to", "reason")
			}
		})
		ev = e
	case "InquiryAssigned":
		var e domain.InquiryAssigned
		ok = flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
			switch string(k) {
			case "owner":
				e.Owner = domain.PrincipalID(text(v, kind, string(e.Owner)))
			case "previous":
				e.Previous = domain.PrincipalID(text(v, kind, string(e.Previous)))
			case "team":
				e.Team = text(v, kind, e.Team)
			default:
				other(k, "owner", "previous", "team")
			}
		})
		ev = e
	case "InquiryReceived":
		var e domain.InquiryReceived
		ok = flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
			switch string(k) {
			case "inquiry_id":
				e.InquiryID = domain.InquiryID(text(v, kind, string(e.InquiryID)))
			case "tenant_id":
				e.TenantID = domain.TenantID(text(v, kind, string(e.TenantID)))
			case "source":
				e.Source = domain.Source(text(v, kind, string(e.Source)))
			case "receipt":
				e.Receipt = text(v, kind, e.Receipt)
			case "requester":
				bad = bad || kind != flatjson.Object // read member by member below
			case "requester.name":
				e.Requester.Name = text(v, kind, e.Requester.Name)
			case "requester.email":
				e.Requester.Email = text(v, kind, e.Requester.Email)
			case "requester.slack_user":
				e.Requester.SlackUser = text(v, kind, e.Requester.SlackUser)
			case "subject":
				e.Subject = text(v, kind, e.Subject)
			case "message":
				e.Message = text(v, kind, e.Message)
			case "category":
				e.Category = text(v, kind, e.Category)
			case "priority":
				e.Priority = domain.Priority(text(v, kind, string(e.Priority)))
			case "submitted_by":
				e.SubmittedBy = domain.PrincipalID(text(v, kind, string(e.SubmittedBy)))
			case "external_id":
				e.ExternalID = text(v, kind, e.ExternalID)
			case "team":
				e.Team = text(v, kind, e.Team)
			case "permalink":
				e.Permalink = text(v, kind, e.Permalink)
			default:
				if r, nested := bytes.CutPrefix(k, []byte("requester.")); nested {
					other(r, "name", "email", "slack_user")
				} else {
					other(k, "inquiry_id", "tenant_id", "source", "receipt", "requester", "subject", "message", "category",
						"priority", "submitted_by", "external_id", "team", "permalink")
				}
			}
		})
		ev = e
	case "NoteAdded":
		var e domain.NoteAdded
		ok = flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
			switch string(k) {
			case "body":
				e.Body = text(v, kind, e.Body)
			default:
				other(k, "body")
			}
		})
		ev = e
	}
	return ev, ok && !bad
}
