package lists

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Row events, in slacklist-{tenant}-{inquiry} (Stream); earlier versions wrote them to the combined
// slackproj-{tenant}-{inquiry} stream shared with threads, which is still read, never written.
// Business truth never changes when they do.

// StreamKind is the kind of an inquiry's List row stream.
const StreamKind = eventstore.KindSlackList

// Stream names an inquiry's List row stream.
func Stream(tenant domain.TenantID, id domain.InquiryID) string {
	return StreamKind.Stream(tenant, string(id))
}

// IsRowEvent reports a List row event type (the List family of a combined legacy stream).
func IsRowEvent(typ string) bool { return strings.HasPrefix(typ, "ListRow") }

// ListRowCreated maps an inquiry to the row items.create returned; recorded before anything else.
type ListRowCreated struct {
	List    string `json:"list_id"`
	RowID   string `json:"row_id"`
	Version uint64 `json:"version"` // canonical version the row shows
}

// ListRowAdopted maps an inquiry to a row found by its verified ownership marker.
type ListRowAdopted struct {
	List    string `json:"list_id"`
	RowID   string `json:"row_id"`
	Version uint64 `json:"version"` // 0: its cells are not known to show any version yet
}

// ListRowUpdated records that the row shows canonical version Version.
type ListRowUpdated struct {
	List    string `json:"list_id"`
	RowID   string `json:"row_id"`
	Version uint64 `json:"version"`
}

// ListRowRemoved ends a mapping: the row was deleted (Reason: resolved, out_of_scope) or found gone.
type ListRowRemoved struct {
	List   string `json:"list_id"`
	RowID  string `json:"row_id"`
	Reason string `json:"reason"`
}

// Projection events, in listprojection-{tenant}-{list}.

// ListRowQuarantined records a row whose marker is invalid, forged or copied from another tenant,
// List or inquiry: reported once, never deleted, never adopted.
type ListRowQuarantined struct {
	List   string `json:"list_id"`
	RowID  string `json:"row_id"`
	Reason string `json:"reason"` // invalid_marker, unknown_inquiry, marker_not_ours
}

// ListProjectionActivated records a passed probe and what it resolved.
type ListProjectionActivated struct {
	List           string `json:"list_id"`
	Team           string `json:"team,omitempty"`
	InstallationID string `json:"installation_id"`
	Clearance      string `json:"clearance"`
	Schema         Schema `json:"schema"`
}

// ListCreated records a List Casebook created through slackLists.create (its projection starts
// disabled, as any other).
type ListCreated struct {
	List           string `json:"list_id"`
	Name           string `json:"name"`
	Clearance      string `json:"clearance"`
	Team           string `json:"team,omitempty"`
	InstallationID string `json:"installation_id"`
}

// ListAccessGranted records one access level Casebook set on a List it created
// (slackLists.access.set). Slack cannot be asked who has access, so these events are the record.
type ListAccessGranted struct {
	List  string `json:"list_id"`
	Grant Grant  `json:"grant"`
}

// ListActivationFailed records a failed probe step and whether its probe row was cleaned up.
type ListActivationFailed struct {
	List      string `json:"list_id"`
	Step      string `json:"step"`
	Error     string `json:"error"`
	CleanedUp bool   `json:"cleaned_up"`
	LeftRow   string `json:"left_row_id,omitempty"`
}

// ListProjectionDeactivated records an operator's deactivation.
type ListProjectionDeactivated struct {
	List string `json:"list_id"`
}

// ListSchemaDrifted records that the List's schema no longer matches the activation's fingerprint.
type ListSchemaDrifted struct {
	List     string `json:"list_id"`
	Expected string `json:"expected_fingerprint"`
	Actual   string `json:"actual_fingerprint,omitempty"`
	Reason   string `json:"reason"`
}

// rowState is one List's mapping folded from an inquiry's slackproj stream.
type rowState struct {
	RowID    string
	Observed uint64
	// Generation names the mapping: the last removed row id, so a new row after a removal gets
	// its own create attempt.
	Generation string
}

type streamState struct {
	Revision int64 // the List stream's last revision, -1: none
	Lists    map[string]*rowState
}

func (st streamState) list(id string) *rowState {
	if r, ok := st.Lists[id]; ok {
		return r
	}
	return &rowState{}
}

// readRows folds an inquiry's List row events; the log, not a projection, is what the worker
// decides on, so a lagging projection never causes a second create.
func readRows(ctx context.Context, store eventstore.Store, tenant domain.TenantID, id domain.InquiryID) (streamState, error) {
	evs, rev, err := slackeffects.ReadStreams(ctx, store, slackeffects.LegacyStream(tenant, id), Stream(tenant, id), IsRowEvent)
	if err != nil {
		return streamState{}, err
	}
	st := streamState{Revision: rev, Lists: map[string]*rowState{}}
	for _, e := range evs {
		ev, err := decodeRowEvent(e.Type, e.Data)
		if err != nil {
			return streamState{}, err
		}
		r := st.Lists[ev.List]
		if r == nil {
			r = &rowState{}
			st.Lists[ev.List] = r
		}
		switch e.Type {
		case "ListRowCreated", "ListRowAdopted":
			r.RowID, r.Observed = ev.RowID, ev.Version
		case "ListRowUpdated":
			if ev.RowID == r.RowID {
				r.Observed = max(r.Observed, ev.Version)
			}
		case "ListRowRemoved":
			if ev.RowID == r.RowID {
				r.RowID, r.Observed, r.Generation = "", 0, ev.RowID
			}
		}
	}
	return st, nil
}

type rowEvent struct {
	List    string `json:"list_id"`
	RowID   string `json:"row_id"`
	Version uint64 `json:"version"`
}

func decodeRowEvent(typ string, data []byte) (rowEvent, error) {
	var ev rowEvent
	switch typ {
	case "ListRowCreated", "ListRowAdopted", "ListRowUpdated", "ListRowRemoved":
		return ev, json.Unmarshal(data, &ev)
	}
	return ev, errors.New("lists: unknown event type " + typ)
}
