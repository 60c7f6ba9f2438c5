package slackproj

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Projection events. They record what Casebook did in Slack; business truth never changes when
// these streams do.

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

// SlackInstalled is the audit event of an install or reinstall (installation-{tenant} stream).
type SlackInstalled struct {
	InstallationID string `json:"installation_id"`
	Key            string `json:"key"`
	EnterpriseID   string `json:"enterprise_id,omitempty"`
	TeamID         string `json:"team_id"`
	AppID          string `json:"app_id,omitempty"`
	Replaces       string `json:"replaces,omitempty"`
}

// SlackDestinationSet is the audit event of a destination change (installation-{tenant} stream).
type SlackDestinationSet struct {
	DestinationID  string `json:"destination_id"`
	Team           string `json:"team,omitempty"`
	InstallationID string `json:"installation_id"`
	Channel        string `json:"channel"`
	Clearance      string `json:"clearance"`
	Replaces       string `json:"replaces,omitempty"`
}

// ThreadStream names an inquiry's Slack projection stream.
func ThreadStream(tenant domain.TenantID, id domain.InquiryID) string {
	return "slackproj-" + string(tenant) + "-" + string(id)
}

// InstallationStream names a tenant's installation audit stream.
func InstallationStream(tenant domain.TenantID) string { return "installation-" + string(tenant) }

func appendEvent(ctx context.Context, store eventstore.Store, stream string, exp eventstore.ExpectedRevision,
	tenant domain.TenantID, commandID string, now time.Time, typ string, payload any) (eventstore.AppendResult, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	meta, err := json.Marshal(domain.Metadata{TenantID: tenant, Actor: "system:slack", CommandID: commandID,
		OccurredAt: now.UTC(), SchemaVersion: 1})
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	return store.Append(ctx, stream, exp, []eventstore.EventData{{
		ID: eventstore.DeterministicID(commandID, 0), Type: typ, Data: data, Metadata: meta,
	}})
}

// threadState is an inquiry's Slack projection folded from its slackproj stream.
type threadState struct {
	Revision     int64 // last revision, -1 for no stream
	Installation string
	Channel      string
	TS           string
	Observed     uint64
}

func readThread(ctx context.Context, store eventstore.Store, tenant domain.TenantID, id domain.InquiryID) (threadState, error) {
	evs, err := store.ReadStream(ctx, ThreadStream(tenant, id), 0, 0)
	if err != nil {
		return threadState{}, err
	}
	st := threadState{Revision: -1}
	for _, e := range evs {
		st.Revision = int64(e.Revision)
		if err := st.apply(e.Type, e.Data); err != nil {
			return threadState{}, err
		}
	}
	return st, nil
}

func (st *threadState) apply(typ string, data []byte) error {
	if IsListEvent(typ) {
		return nil // List rows share the stream (package lists); they never change the thread
	}
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
	default:
		return fmt.Errorf("slackproj: unknown event type %q", typ)
	}
	return nil
}

// IsListEvent reports a List row event (ListRowCreated, ListRowAdopted, …) of package lists, which
// shares the slackproj-{tenant}-{inquiry} stream with the thread's events.
func IsListEvent(typ string) bool { return strings.HasPrefix(typ, "ListRow") }

func expectAfter(rev int64) eventstore.ExpectedRevision {
	if rev < 0 {
		return eventstore.NoStream()
	}
	return eventstore.Exact(uint64(rev))
}

// AppendPast appends to an inquiry's slackproj stream after revision rev. Thread effects and List
// rows share the stream but never decide on each other's events, so when the append loses the race
// only to events of the other family it appends again after them; an event of its own family
// (own reports which) means its decision may be stale, and the error (matching
// domain.ErrConcurrency) is returned.
func AppendPast(ctx context.Context, store eventstore.Store, stream string, rev int64, own func(typ string) bool,
	appendAt func(eventstore.ExpectedRevision) (eventstore.AppendResult, error)) (eventstore.AppendResult, error) {
	for {
		res, err := appendAt(expectAfter(rev))
		if !isConflict(err) {
			return res, err
		}
		evs, rerr := store.ReadStream(ctx, stream, uint64(rev+1), 0)
		if rerr != nil {
			return res, rerr
		}
		if len(evs) == 0 {
			return res, err
		}
		for _, e := range evs {
			if own(e.Type) {
				return res, err
			}
		}
		rev = int64(evs[len(evs)-1].Revision)
	}
}

// isThreadEvent is the thread family of a slackproj stream.
func isThreadEvent(typ string) bool { return !IsListEvent(typ) }

// isConflict reports a lost race on a stream's expected revision.
func isConflict(err error) bool { return errors.Is(err, domain.ErrConcurrency) }
