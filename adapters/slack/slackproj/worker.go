package slackproj

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/slack-go/slack"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// MetadataEventType marks Casebook's messages; the payload's "key" is an opaque reference to the
// effect key (Sealer.Ref), which finds a message whose post had an unknown result.
const MetadataEventType = "casebook_effect"

// Failure classes recorded in health and shown to operators.
const (
	ClassRateLimited = "rate_limited"   // shared cooldown, no attempt spent
	ClassCircuit     = "circuit_open"   // auth/permission/channel: the destination's circuit opens
	ClassQuarantined = "quarantined"    // bad message data: this effect is cancelled with a reason
	ClassUnknown     = "unknown_result" // timeout, dropped connection, 5xx: reconcile before re-posting
	ClassTransient   = "transient"
)

var circuitCodes = map[string]bool{
	"not_authed": true, "invalid_auth": true, "token_revoked": true, "account_inactive": true,
	"missing_scope": true, "channel_not_found": true, "not_in_channel": true, "is_archived": true,
}

var quarantineCodes = map[string]bool{
	"invalid_blocks": true, "invalid_blocks_format": true, "msg_too_long": true, "no_text": true,
	"invalid_metadata_format": true, "invalid_arguments": true, "too_many_attachments": true,
}

// Loader reads an inquiry's canonical state (commands.Handler.Load).
type Loader func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error)

// Worker works SyncArgs. It re-reads canonical state and applies the newest version, so a job that
// finds its version (or a newer one) already shown does nothing. chat.postMessage is never retried
// blindly: an attempt is recorded before the post, and a job finding an earlier attempt first looks
// for the effect key in the channel's message metadata and adopts what it finds.
type Worker struct {
	river.WorkerDefaults[SyncArgs]
	Store  *Store
	Events eventstore.Store
	Load   Loader
	// LinkBase is the operator UI's base URL for the authenticated link ("" omits the link).
	LinkBase string
	// HistoryLimit is how many recent top-level messages reconciliation reads (default 200).
	HistoryLimit int
	Timing

	afterPost func() error // test hook: a crash between the post and its record
	once      sync.Once
}

// Timing paces a Slack effect worker (threads here, List rows in package lists).
type Timing struct {
	// ProbeEvery is how often an open circuit lets one job through as a probe (default 5 min).
	ProbeEvery time.Duration
	// AttemptStale is how old a recorded create attempt must be before another job reconciles it:
	// longer than any in-flight call (default 1 min; the HTTP client times out after 10 s).
	AttemptStale time.Duration
	// InFlightRecheck is how soon a job that found another job's create in flight looks again: by
	// then the other has usually recorded its result (default 2 s; reconciling waits AttemptStale).
	InFlightRecheck time.Duration
}

// WithDefaults returns t with its zero fields set to their defaults.
func (t Timing) WithDefaults() Timing {
	if t.ProbeEvery == 0 {
		t.ProbeEvery = 5 * time.Minute
	}
	if t.AttemptStale == 0 {
		t.AttemptStale = time.Minute
	}
	if t.InFlightRecheck == 0 {
		t.InFlightRecheck = min(2*time.Second, t.AttemptStale)
	}
	return t
}

func (w *Worker) defaults() { w.once.Do(w.setDefaults) }

func (w *Worker) setDefaults() {
	if w.HistoryLimit == 0 {
		w.HistoryLimit = 200
	}
	w.Timing = w.WithDefaults()
}

// Work implements river.Worker.
func (w *Worker) Work(ctx context.Context, job *river.Job[SyncArgs]) error {
	w.defaults()
	a := job.Args
	q, err := w.Load(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return err
	}
	if !q.Exists() {
		return river.JobCancel(fmt.Errorf("inquiry %s: %w", a.Inquiry, domain.ErrNotFound))
	}
	dest, err := w.Store.DestinationFor(ctx, a.Tenant, q.Team)
	if errors.Is(err, domain.ErrNotFound) {
		return nil // Slack disabled for this tenant: zero I/O
	}
	if err != nil {
		return err
	}
	th, err := readThread(ctx, w.Events, a.Tenant, a.Inquiry)
	if err != nil {
		return err
	}
	mapped := th.TS != "" && th.Channel == dest.Channel && th.Installation == dest.Installation.Key
	if mapped && th.Observed >= q.Version {
		return nil // coalesced: a newer job already applied this version or a later one
	}
	wait, err := w.Store.gate(ctx, dest, w.ProbeEvery)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	api := w.Store.Client(dest.Installation)
	if mapped {
		err = w.sync(ctx, api, dest, q, th)
	} else {
		err = w.postRoot(ctx, api, dest, q, th, "")
	}
	if err != nil {
		return w.classify(ctx, dest, a, err)
	}
	if err := w.Store.closeCircuitAfterSuccess(ctx, dest); err != nil {
		return err
	}
	return w.Store.recordSuccess(ctx, a.Tenant, a.Inquiry)
}

func (w *Worker) link(q *domain.Inquiry) string {
	if w.LinkBase == "" {
		return ""
	}
	return w.LinkBase + "/inquiries/r/" + url.PathEscape(q.Receipt)
}

// metadata marks a message with the effect key's opaque reference.
func (w *Worker) metadata(key string) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: MetadataEventType, EventPayload: map[string]any{"key": w.Store.Sealer.Ref(key)}})
}

// postRoot posts (or adopts) the root message in dest and records it before anything else.
// after names a root that vanished, so its replacement gets its own effect key.
func (w *Worker) postRoot(ctx context.Context, api *slack.Client, dest Destination, q *domain.Inquiry, th threadState, after string) error {
	key := fmt.Sprintf("root/%s/%s/%s/%s/%s", q.TenantID, q.ID, dest.Installation.Key, dest.Channel, after)
	fresh, reconcile, err := w.Store.claimAttempt(ctx, key, w.AttemptStale)
	if err != nil {
		return err
	}
	if !fresh && !reconcile {
		return river.JobSnooze(w.InFlightRecheck) // another job's post is in flight
	}
	ts, adopted := "", false
	if reconcile {
		if ts, err = w.findByKey(ctx, api, dest.Channel, key); err != nil {
			return err
		}
		adopted = ts != ""
	}
	if ts == "" {
		r := RenderRoot(q, dest.Clearance, w.link(q))
		_, ts, err = api.PostMessageContext(ctx, dest.Channel, slack.MsgOptionText(r.Text, false), slack.MsgOptionBlocks(r.Blocks...), w.metadata(key))
		if err != nil {
			if certainlyNotApplied(err) {
				_ = w.Store.releaseAttempt(ctx, key)
			}
			return err
		}
	}
	if w.afterPost != nil {
		if err := w.afterPost(); err != nil {
			return err
		}
	}
	stream := ThreadStream(q.TenantID, q.ID)
	_, err = AppendPast(ctx, w.Events, stream, th.Revision, isThreadEvent, func(exp eventstore.ExpectedRevision) (eventstore.AppendResult, error) {
		return appendEvent(ctx, w.Events, stream, exp, q.TenantID, "slack:"+key, w.Store.Now(),
			"SlackThreadPosted", SlackThreadPosted{Installation: dest.Installation.Key, Channel: dest.Channel, TS: ts, Version: q.Version, Adopted: adopted})
	})
	if isConflict(err) {
		return river.JobSnooze(0) // the stream moved: look again
	}
	return err
}

// sync brings an existing thread to q.Version: update the root (idempotent), then one reply. A
// reply whose post had an unknown result is not re-sent (at most once): replies are not listed by
// conversations.history, so it cannot be reconciled the way a root is.
func (w *Worker) sync(ctx context.Context, api *slack.Client, dest Destination, q *domain.Inquiry, th threadState) error {
	r := RenderRoot(q, dest.Clearance, w.link(q))
	_, _, _, err := api.UpdateMessageContext(ctx, dest.Channel, th.TS, slack.MsgOptionText(r.Text, false), slack.MsgOptionBlocks(r.Blocks...))
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "message_not_found" {
		return w.postRoot(ctx, api, dest, q, th, th.TS) // the root was deleted: a new mapping
	}
	if err != nil {
		return err
	}
	key := fmt.Sprintf("reply/%s/%s/%s/%d", q.TenantID, q.ID, th.TS, q.Version)
	fresh, _, err := w.Store.claimAttempt(ctx, key, w.AttemptStale)
	if err != nil {
		return err
	}
	if fresh {
		rep := RenderReply(q, dest.Clearance)
		_, _, err = api.PostMessageContext(ctx, dest.Channel, slack.MsgOptionText(rep.Text, false), slack.MsgOptionBlocks(rep.Blocks...),
			slack.MsgOptionTS(th.TS), w.metadata(key))
		if err != nil {
			if certainlyNotApplied(err) {
				_ = w.Store.releaseAttempt(ctx, key)
			}
			return err
		}
	}
	stream := ThreadStream(q.TenantID, q.ID)
	_, err = AppendPast(ctx, w.Events, stream, th.Revision, isThreadEvent, func(exp eventstore.ExpectedRevision) (eventstore.AppendResult, error) {
		return appendEvent(ctx, w.Events, stream, exp, q.TenantID, "slack:"+key, w.Store.Now(),
			"SlackThreadSynced", SlackThreadSynced{Version: q.Version})
	})
	if isConflict(err) {
		return river.JobSnooze(0)
	}
	return err
}

// findByKey looks for a message carrying the effect key in the channel's recent history.
func (w *Worker) findByKey(ctx context.Context, api *slack.Client, channel, key string) (string, error) {
	cursor, seen := "", 0
	for seen < w.HistoryLimit {
		res, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: channel, Cursor: cursor, Limit: min(100, w.HistoryLimit-seen), IncludeAllMetadata: true,
		})
		if err != nil {
			return "", err
		}
		for _, m := range res.Messages {
			if m.Metadata.EventType == MetadataEventType && m.Metadata.EventPayload["key"] == w.Store.Sealer.Ref(key) {
				return m.Timestamp, nil
			}
		}
		seen += len(res.Messages)
		cursor = res.ResponseMetaData.NextCursor
		if !res.HasMore || cursor == "" || len(res.Messages) == 0 {
			break
		}
	}
	return "", nil
}

// certainlyNotApplied reports an answer that proves the write did not happen: a Slack error
// response or a 429. Timeouts, dropped connections and 5xx are unknown.
func certainlyNotApplied(err error) bool {
	var se slack.SlackErrorResponse
	var rl *slack.RateLimitedError
	return errors.As(err, &se) || errors.As(err, &rl)
}

// classify turns a failed call into River's outcome and records health.
func (w *Worker) classify(ctx context.Context, dest Destination, a SyncArgs, err error) error {
	ctx = context.WithoutCancel(ctx) // record the outcome even when the call was abandoned
	var snooze *river.JobSnoozeError
	if errors.As(err, &snooze) {
		return err
	}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	class, out := ClassTransient, err
	switch {
	case errors.As(err, &rl):
		wait := max(rl.RetryAfter, time.Second)
		if e := w.Store.setCooldown(ctx, dest, w.Store.Now().Add(wait)); e != nil {
			return e
		}
		class, out = ClassRateLimited, river.JobSnooze(wait)
	case errors.As(err, &se) && circuitCodes[se.Err]:
		if e := w.Store.openCircuit(ctx, dest, se.Err, w.ProbeEvery); e != nil {
			return e
		}
		class, out = ClassCircuit, river.JobSnooze(w.ProbeEvery)
	case errors.As(err, &se) && quarantineCodes[se.Err]:
		class, out = ClassQuarantined, river.JobCancel(fmt.Errorf("quarantined: slack answered %s", se.Err))
	case errors.As(err, &sc) && sc.Code >= 500, !errors.As(err, &se):
		class = ClassUnknown
	}
	if e := w.Store.recordError(ctx, a.Tenant, a.Inquiry, class, err.Error()); e != nil {
		return errors.Join(out, e)
	}
	return out
}
