package eventstore

import (
	"slices"

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
	switch typ {
	case "InquiryTriaged":
		return flat(data, triaged)
	case "InquiryStatusChanged":
		return flat(data, statusChanged)
	case "InquiryAssigned":
		return flat(data, assigned)
	case "InquiryReceived":
		return flat(data, received)
	case "NoteAdded":
		return flat(data, noteAdded)
	}
	return nil, false
}

// shape is how the fast path reads a type whose members are all strings: a setter per member name
// (a nested object's members as "outer.inner"), and the names of the nested objects.
type shape[T domain.Event] struct {
	fields  map[string]func(*T, string)
	objects []string
}

var (
	triaged = shape[domain.InquiryTriaged]{fields: map[string]func(*domain.InquiryTriaged, string){
		"priority": func(e *domain.InquiryTriaged, v string) { e.Priority = domain.Priority(v) },
	}}
	statusChanged = shape[domain.InquiryStatusChanged]{fields: map[string]func(*domain.InquiryStatusChanged, string){
		"from":   func(e *domain.InquiryStatusChanged, v string) { e.From = domain.Status(v) },
		"to":     func(e *domain.InquiryStatusChanged, v string) { e.To = domain.Status(v) },
		"reason": func(e *domain.InquiryStatusChanged, v string) { e.Reason = v },
	}}
	assigned = shape[domain.InquiryAssigned]{fields: map[string]func(*domain.InquiryAssigned, string){
		"owner":    func(e *domain.InquiryAssigned, v string) { e.Owner = domain.PrincipalID(v) },
		"previous": func(e *domain.InquiryAssigned, v string) { e.Previous = domain.PrincipalID(v) },
		"team":     func(e *domain.InquiryAssigned, v string) { e.Team = v },
	}}
	received = shape[domain.InquiryReceived]{objects: []string{"requester"}, fields: map[string]func(*domain.InquiryReceived, string){
		"inquiry_id":           func(e *domain.InquiryReceived, v string) { e.InquiryID = domain.InquiryID(v) },
		"tenant_id":            func(e *domain.InquiryReceived, v string) { e.TenantID = domain.TenantID(v) },
		"source":               func(e *domain.InquiryReceived, v string) { e.Source = domain.Source(v) },
		"receipt":              func(e *domain.InquiryReceived, v string) { e.Receipt = v },
		"requester.name":       func(e *domain.InquiryReceived, v string) { e.Requester.Name = v },
		"requester.email":      func(e *domain.InquiryReceived, v string) { e.Requester.Email = v },
		"requester.slack_user": func(e *domain.InquiryReceived, v string) { e.Requester.SlackUser = v },
		"subject":              func(e *domain.InquiryReceived, v string) { e.Subject = v },
		"message":              func(e *domain.InquiryReceived, v string) { e.Message = v },
		"category":             func(e *domain.InquiryReceived, v string) { e.Category = v },
		"priority":             func(e *domain.InquiryReceived, v string) { e.Priority = domain.Priority(v) },
		"submitted_by":         func(e *domain.InquiryReceived, v string) { e.SubmittedBy = domain.PrincipalID(v) },
		"external_id":          func(e *domain.InquiryReceived, v string) { e.ExternalID = v },
		"team":                 func(e *domain.InquiryReceived, v string) { e.Team = v },
		"permalink":            func(e *domain.InquiryReceived, v string) { e.Permalink = v },
	}}
	noteAdded = shape[domain.NoteAdded]{fields: map[string]func(*domain.NoteAdded, string){
		"body": func(e *domain.NoteAdded, v string) { e.Body = v },
	}}
)

// flat reads data as encoding/json reads it into a T of shape s: a string sets its member, null
// keeps it. It reports false, for domain.Decode to decide, on any other value of a member, and on
// a name encoding/json could match to a member in another case (Unicode folding included, so any
// name outside ASCII); other names are ignored, as encoding/json ignores them.
func flat[T domain.Event](data []byte, s shape[T]) (domain.Event, bool) {
	var e T
	bad := false
	ok := flatjson.Each(data, func(k, v []byte, kind flatjson.Kind) {
		if set, known := s.fields[string(k)]; known {
			switch {
			case kind.IsString():
				set(&e, string(v))
			case kind != flatjson.Literal || string(v) != "null":
				bad = true
			}
			return
		}
		if slices.ContainsFunc(s.objects, func(o string) bool { return string(k) == o }) {
			bad = bad || kind != flatjson.Object
			return
		}
		bad = bad || s.mayName(k)
	})
	return e, ok && !bad
}

// mayName reports whether encoding/json could read the member named k into one of s's members.
func (s shape[T]) mayName(k []byte) bool {
	for f := range s.fields {
		if flatjson.MayName(k, f) {
			return true
		}
	}
	return slices.ContainsFunc(s.objects, func(o string) bool { return flatjson.MayName(k, o) })
}
