package reminders

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// StreamKind is the kind of an inquiry's due-effect stream, slackdue-{tenant}-{inquiry}.
const StreamKind = eventstore.KindSlackDue

// Stream names an inquiry's due-effect stream.
func Stream(tenant domain.TenantID, id domain.InquiryID) string {
	return StreamKind.Stream(tenant, string(id))
}

// SlackReminderPosted records the reply for the due event at canonical version Version.
type SlackReminderPosted struct {
	Version uint64 `json:"version"`
	Channel string `json:"channel"`
	Root    string `json:"root_ts"`
	TS      string `json:"ts"`
	Adopted bool   `json:"adopted,omitempty"`
}

// SlackEscalationPosted records the escalation post for the InquiryEscalated at Version.
type SlackEscalationPosted struct {
	Version      uint64 `json:"version"`
	Installation string `json:"installation"`
	Channel      string `json:"channel"`
	TS           string `json:"ts"`
	Adopted      bool   `json:"adopted,omitempty"`
}

// SlackEscalationDeleted records that the escalation post TS was deleted (erasure).
type SlackEscalationDeleted struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// posted is an inquiry's due-effect stream folded: what was posted, by "reminder/<v>" or
// "escalation/<v>", the escalation posts not deleted yet, and the stream's last revision (-1:
// none).
type posted struct {
	done        map[string]bool
	escalations []SlackEscalationPosted
	rev         int64
}

func readPosted(ctx context.Context, store eventstore.Store, tenant domain.TenantID, id domain.InquiryID) (posted, error) {
	evs, err := store.ReadStream(ctx, Stream(tenant, id), 0, 0)
	if err != nil {
		return posted{}, err
	}
	p := posted{done: map[string]bool{}, rev: -1}
	for _, e := range evs {
		p.rev = int64(e.Revision)
		var v struct {
			Version uint64 `json:"version"`
		}
		if err := json.Unmarshal(e.Data, &v); err != nil {
			return posted{}, err
		}
		switch e.Type {
		case "SlackReminderPosted":
			p.done[fmt.Sprintf("reminder/%d", v.Version)] = true
		case "SlackEscalationPosted":
			p.done[fmt.Sprintf("escalation/%d", v.Version)] = true
			var ep SlackEscalationPosted
			if err := json.Unmarshal(e.Data, &ep); err != nil {
				return posted{}, err
			}
			p.escalations = append(p.escalations, ep)
		case "SlackEscalationDeleted":
			var d SlackEscalationDeleted
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return posted{}, err
			}
			p.escalations = slices.DeleteFunc(p.escalations, func(ep SlackEscalationPosted) bool { return ep.Channel == d.Channel && ep.TS == d.TS })
		default:
			return posted{}, fmt.Errorf("reminders: unknown event type %q", e.Type)
		}
	}
	return p, nil
}
