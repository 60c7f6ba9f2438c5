package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Thread events. They record what Casebook did in Slack; business truth never changes when these
// streams do.

// SlackThreadPosted maps an inquiry to a root message: a new mapping per destination change.
// Installation is the installation key (enterprise/team/app), not a row id, so a reinstall of the
// same app in the same workspace keeps the thread.
type SlackThreadPosted struct {
	Installation string `json:"installation"`
	Channel      string `json:"channel"`
	TS           string `json:"ts"`
	Version      uint64 `json:"version"` // canonical version the root shows
	Adopted      bool   `json:"adopted,omitempty"`
}

// SlackThreadSynced records that the root and thread show canonical version Version.
type SlackThreadSynced struct {
	Version uint64 `json:"version"`
}

// SlackThreadDeleted records that the inquiry's thread was deleted from Slack (its erasure): every
// reply Casebook could delete and then the root. The mapping is revoked: nothing is posted again.
// Kept counts the replies Slack refused to let the app delete (people's own replies).
type SlackThreadDeleted struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	Version uint64 `json:"version"`
	Kept    int    `json:"kept,omitempty"`
}

// SlackThreadDeleteProgress records how far an erasure's deletion of the thread at (Channel, TS)
// has examined its replies: every reply up to Through was deleted or, Kept of them, refused (people's
// own replies). The next run reads the replies after Through, so a thread whose first pages hold
// only replies the app may not delete still converges under Slack's history limits.
type SlackThreadDeleteProgress struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	Through string `json:"through"`
	Kept    int    `json:"kept,omitempty"`
}

// StreamKind is the kind of an inquiry's thread stream, slackthread-{tenant}-{inquiry}.
const StreamKind = eventstore.KindSlackThread

// Stream names an inquiry's thread stream.
func Stream(tenant domain.TenantID, id domain.InquiryID) string {
	return StreamKind.Stream(tenant, string(id))
}

// IsThreadEvent reports a thread event type (the thread family of a combined legacy stream).
func IsThreadEvent(typ string) bool { return strings.HasPrefix(typ, "SlackThread") }

// threadState is an inquiry's thread folded from its thread events.
type threadState struct {
	Revision     int64 // the thread stream's last revision, -1 for none
	Installation string
	Channel      string
	TS           string
	Observed     uint64
	Deleted      bool // the thread was deleted (erasure): never posted again
	// Deletion is the progress of the thread's deletion (root DeletingTS): replies examined up to
	// DeletedThrough, DeleteKept of them refused.
	DeletingTS, DeletedThrough string
	DeleteKept                 int
}

// readThread folds the thread events of an inquiry: the log, not a projection, is what the worker
// decides on, so a lagging projection never causes a second post.
func readThread(ctx context.Context, store eventstore.Store, tenant domain.TenantID, id domain.InquiryID) (threadState, error) {
	evs, rev, err := slackeffects.ReadStreams(ctx, store, slackeffects.LegacyStream(tenant, id), Stream(tenant, id), IsThreadEvent)
	if err != nil {
		return threadState{}, err
	}
	st := threadState{Revision: rev}
	for _, e := range evs {
		if err := st.apply(e.Type, e.Data); err != nil {
			return threadState{}, err
		}
	}
	return st, nil
}

func (st *threadState) apply(typ string, data []byte) error {
	switch typ {
	case "SlackThreadPosted":
		var e SlackThreadPosted
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		st.Installation, st.Channel, st.TS, st.Observed = e.Installation, e.Channel, e.TS, e.Version
	case "SlackThreadSynced":
		var e SlackThreadSynced
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		st.Observed = max(st.Observed, e.Version)
	case "SlackThreadDeleted":
		var e SlackThreadDeleted
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		st.TS, st.Channel, st.Installation, st.Deleted = "", "", "", true
		st.Observed = max(st.Observed, e.Version)
	case "SlackThreadDeleteProgress":
		var e SlackThreadDeleteProgress
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		st.DeletingTS, st.DeletedThrough, st.DeleteKept = e.TS, e.Through, e.Kept
	default:
		return fmt.Errorf("threads: unknown event type %q", typ)
	}
	return nil
}
