package querymodel

import (
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/flatjson"
)

// decodeEvent decodes the flat event types without reflection and defers everything else (and
// every other schema version) to domain.Decode.
func decodeEvent(typ string, schemaVersion int, data []byte) (domain.Event, error) {
	if schemaVersion != domain.SchemaVersion {
		return domain.Decode(typ, schemaVersion, data)
	}
	bad := false
	// text reads a string member; null keeps the current value, as encoding/json does.
	text := func(v []byte, kind flatjson.Kind, cur string) string {
		if !kind.IsString() {
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
		ok = flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
			switch string(k) {
			case "priority":
				e.Priority = domain.Priority(text(v, kind, string(e.Priority)))
			default:
				bad = true // encoding/json matches keys case-insensitively: let it decide
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
				bad = true
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
				bad = true
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
			case "subject":
				e.Subject = text(v, kind, e.Subject)
			case "message":
				e.Message = text(v, kind, e.Message)
			case "category":
				e.Category = text(v, kind, e.Category)
			case "priority":
				e.Priority = domain.Priority(text(v, kind, string(e.Priority)))
			default:
				bad = true
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
