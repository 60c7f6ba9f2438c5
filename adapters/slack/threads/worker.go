package threads

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// MetadataEventType marks Casebook's messages; the payload's "key" is an opaque reference to the
// effect key (Sealer.Ref), which finds a message whose post had an unknown result.
const MetadataEventType = "casebook_effect"

// SyncArgs asks for an inquiry's thread to show at least Version. Unique per tenant + inquiry +
// kind + version; the worker applies the newest canonical version it finds, so older jobs coalesce.
type SyncArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	Version uint64           `json:"version"`
}

// Kind implements river.JobArgs: the thread effect kind and its queue.
func (SyncArgs) Kind() string { return "slack_thread_sync" }

// EffectRef implements slackeffects.Args.
func (a SyncArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry, Version: a.Version}
}

// Worker is the thread effect kind. It re-reads canonical state and applies the newest version, so
// a job that finds its version (or a newer one) already shown does nothing. chat.postMessage is
// never retried blindly: an attempt is claimed in the ledger before the post, and a job finding an
// earlier attempt first looks for the effect key in the channel's message metadata and adopts what
// it finds.
type Worker struct {
	Effects *slackeffects.Runtime
	Load    slackeffects.Loader
	// LinkBase is the operator UI's base URL for the authenticated link ("" omits the link).
	LinkBase string
	// Principals names an owner in messages (with the installation's Slack user links); nil
	// names nobody: an owner is then "someone without a linked Slack account", never an id.
	Principals interface {
		Principal(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) (domain.Principal, error)
	}

	afterPost func() error // test hook: a crash between the post and its record
}

var _ slackeffects.Kind[SyncArgs] = (*Worker)(nil)

// Register adds the thread kind to the runtime.
func Register(rt *slackeffects.Runtime, w *Worker) error {
	w.Effects = rt
	return slackeffects.Register[SyncArgs](rt, w)
}

func (w *Worker) install() *slackinstall.Store { return w.Effects.Install }

// Plan implements slackeffects.Kind.
func (w *Worker) Plan(ctx context.Context, a SyncArgs) (*slackeffects.Plan, error) {
	q, err := w.Load(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	if !q.Exists() {
		return nil, slackeffects.Cancel(fmt.Errorf("inquiry %s: %w", a.Inquiry, domain.ErrNotFound))
	}
	th, err := readThread(ctx, w.Effects.Events, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	if q.Erased || th.Deleted {
		// Erasure: delete the thread where it was posted, with the installation that posted it,
		// whatever the destinations say now (one may have been removed or moved since); an
		// erased inquiry is never posted.
		if th.Deleted {
			return nil, nil
		}
		if th.TS == "" {
			return w.planUnrecordedRootDeletion(ctx, q, th)
		}
		in, err := w.install().InstallationOfKey(ctx, a.Tenant, th.Installation)
		if errors.Is(err, domain.ErrNotFound) {
			// No active installation can act there any more (uninstalled): fail visibly, as a
			// dead letter an operator sees, rather than report the thread deleted.
			return nil, slackeffects.Cancel(fmt.Errorf("erase the thread of %s in %s: its installation is gone; delete it in Slack by hand: %w",
				a.Inquiry, th.Channel, err))
		}
		if err != nil {
			return nil, err
		}
		return &slackeffects.Plan{
			Target:       slackeffects.Target{Tenant: a.Tenant, Installation: th.Installation, Destination: th.Channel, Inquiry: a.Inquiry},
			Installation: in,
			Do: func(ctx context.Context, api *slack.Client) error {
				return w.deleteThread(ctx, api, q, th)
			},
		}, nil
	}
	dest, err := w.install().DestinationFor(ctx, a.Tenant, q.Team)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil // Slack disabled for this tenant: zero I/O
	}
	if err != nil {
		return nil, err
	}
	mapped := th.TS != "" && th.Channel == dest.Channel && th.Installation == dest.Installation.Key
	if mapped && th.Observed >= q.Version {
		return nil, nil // coalesced: a newer job already applied this version or a later one
	}
	var pending time.Time
	if mapped { // updates are debounced; a first post is not
		if pending, err = w.Effects.FirstUnshown(ctx, a.Tenant, a.Inquiry, th.Observed); err != nil {
			return nil, err
		}
	}
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: a.Tenant, Installation: dest.Installation.Key, Destination: dest.Channel, Inquiry: a.Inquiry},
		Installation: dest.Installation,
		Changed:      changedIf(mapped, q.UpdatedAt),
		Pending:      pending,
		Do: func(ctx context.Context, api *slack.Client) error {
			if mapped {
				return w.sync(ctx, api, dest, q, th)
			}
			return w.postRoot(ctx, api, dest, q, th, "")
		},
	}, nil
}

// planUnrecordedRootDeletion plans the erasure of a root that may have been posted without being
// recorded (a post whose outcome was unknown, or a worker that died before its record): when the
// ledger holds an attempt of the root's effect key at the tenant's destination, the attempt's
// window is looked up like a retried post's and a root found there is deleted with its thread.
// Without an attempt nothing was posted: no Slack I/O.
func (w *Worker) planUnrecordedRootDeletion(ctx context.Context, q *domain.Inquiry, th threadState) (*slackeffects.Plan, error) {
	dest, err := w.install().DestinationFor(ctx, q.TenantID, q.Team)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	key := rootKey(q, dest, "")
	if tried, err := w.Effects.Ledger.Attempted(ctx, key); err != nil || !tried {
		return nil, err
	}
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: q.TenantID, Installation: dest.Installation.Key, Destination: dest.Channel, Inquiry: q.ID},
		Installation: dest.Installation,
		Do: func(ctx context.Context, api *slack.Client) error {
			fresh, reconcile, err := w.Effects.Ledger.Claim(ctx, key, w.Effects.Timing.AttemptStale)
			switch {
			case err != nil:
				return err
			case fresh: // released meanwhile: nothing was posted
				return w.Effects.Ledger.Release(ctx, key)
			case !reconcile:
				return slackeffects.Snooze(w.Effects.Timing.InFlightRecheck) // the post may still be in flight
			}
			ts, err := w.Effects.FindPosted(ctx, api, w.install().Sealer, dest.Channel, key)
			if err != nil || ts == "" {
				return err
			}
			found := th
			found.Installation, found.Channel, found.TS = dest.Installation.Key, dest.Channel, ts
			return w.deleteThread(ctx, api, q, found)
		},
	}, nil
}

// rootKey is the effect key of q's root in dest; after names a vanished root it replaces.
func rootKey(q *domain.Inquiry, dest slackinstall.Destination, after string) string {
	return fmt.Sprintf("root/%s/%s/%s/%s/%s", q.TenantID, q.ID, dest.Installation.Key, dest.Channel, after)
}

// changedIf is at when the write is debounced, else zero.
func changedIf(debounced bool, at time.Time) time.Time {
	if !debounced {
		return time.Time{}
	}
	return at
}

func (w *Worker) link(q *domain.Inquiry) string {
	if w.LinkBase == "" {
		return ""
	}
	return w.LinkBase + "/inquiries/r/" + url.PathEscape(q.Receipt)
}

// metadata marks a message with the effect key's opaque reference.
func (w *Worker) metadata(key string) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: MetadataEventType, EventPayload: map[string]any{"key": w.install().Sealer.Ref(key)}})
}

// post sends a message claimed under key; a failure that proves nothing was posted releases the
// claim, any other keeps it so the next attempt reconciles.
func (w *Worker) post(ctx context.Context, api *slack.Client, channel, key string, opts ...slack.MsgOption) (string, error) {
	_, ts, err := api.PostMessageContext(ctx, channel, append(opts, w.metadata(key))...)
	if err != nil && slackeffects.CertainlyNotApplied(err) {
		_ = w.Effects.Ledger.Release(ctx, key)
	}
	return ts, err
}

// postRoot posts (or adopts) the root message in dest and records it before anything else.
// after names a root that vanished, so its replacement gets its own effect key.
func (w *Worker) postRoot(ctx context.Context, api *slack.Client, dest slackinstall.Destination, q *domain.Inquiry, th threadState, after string) error {
	key := rootKey(q, dest, after)
	fresh, reconcile, err := w.Effects.Ledger.Claim(ctx, key, w.Effects.Timing.AttemptStale)
	if err != nil {
		return err
	}
	if !fresh && !reconcile {
		return slackeffects.Snooze(w.Effects.Timing.InFlightRecheck) // another job's post is in flight
	}
	ts, adopted := "", false
	if reconcile {
		if ts, err = w.Effects.FindPosted(ctx, api, w.install().Sealer, dest.Channel, key); err != nil {
			return err
		}
		adopted = ts != ""
	}
	if ts == "" {
		owner, err := w.owner(ctx, q, dest.Installation.Key)
		if err != nil {
			return err
		}
		r := RenderRoot(q, dest.Clearance, w.link(q), owner)
		if ts, err = w.post(ctx, api, dest.Channel, key, slack.MsgOptionText(r.Text, false), slack.MsgOptionBlocks(r.Blocks...)); err != nil {
			return err
		}
	}
	if w.afterPost != nil {
		if err := w.afterPost(); err != nil {
			return err
		}
	}
	_, err = w.Effects.Record(ctx, Stream(q.TenantID, q.ID), th.Revision, q.TenantID, "slack:"+key, "SlackThreadPosted",
		SlackThreadPosted{Installation: dest.Installation.Key, Channel: dest.Channel, TS: ts, Version: q.Version, Adopted: adopted})
	return err
}

// sync brings an existing thread to q.Version: update the root (idempotent), then one reply. A
// reply whose post had an unknown result is not re-sent (at most once): replies are not listed by
// conversations.history, so it cannot be reconciled the way a root is.
func (w *Worker) sync(ctx context.Context, api *slack.Client, dest slackinstall.Destination, q *domain.Inquiry, th threadState) error {
	owner, err := w.owner(ctx, q, dest.Installation.Key)
	if err != nil {
		return err
	}
	r := RenderRoot(q, dest.Clearance, w.link(q), owner)
	err = w.Effects.Exclusive(ctx, fmt.Sprintf("update/%s/%s/%s/%d", q.TenantID, q.ID, th.TS, q.Version), func() error {
		_, _, _, err := api.UpdateMessageContext(ctx, dest.Channel, th.TS, slack.MsgOptionText(r.Text, false), slack.MsgOptionBlocks(r.Blocks...))
		return err
	})
	if slackeffects.Classify(err).Class == slackeffects.ClassGone {
		return w.postRoot(ctx, api, dest, q, th, th.TS) // the root was deleted: a new mapping
	}
	if err != nil {
		return err
	}
	key := fmt.Sprintf("reply/%s/%s/%s/%d", q.TenantID, q.ID, th.TS, q.Version)
	fresh, _, err := w.Effects.Ledger.Claim(ctx, key, w.Effects.Timing.AttemptStale)
	if err != nil {
		return err
	}
	if fresh {
		rep := RenderReply(q, dest.Clearance, owner)
		if _, err := w.post(ctx, api, dest.Channel, key, slack.MsgOptionText(rep.Text, false), slack.MsgOptionBlocks(rep.Blocks...), slack.MsgOptionTS(th.TS)); err != nil {
			return err
		}
	}
	_, err = w.Effects.Record(ctx, Stream(q.TenantID, q.ID), th.Revision, q.TenantID, "slack:"+key, "SlackThreadSynced", SlackThreadSynced{Version: q.Version})
	return err
}

// owner is q's owner as messages in the installation with key name them: their linked Slack
// user and display name. No owner, or one no longer of the tenant, is the zero Person.
func (w *Worker) owner(ctx context.Context, q *domain.Inquiry, key string) (slackinstall.Person, error) {
	if q.Owner == "" {
		return slackinstall.Person{}, nil
	}
	var p slackinstall.Person
	if w.Principals != nil {
		pr, err := w.Principals.Principal(ctx, q.TenantID, q.Owner)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			return p, nil
		case err != nil:
			return p, err
		}
		p.Name = pr.Name
	}
	users, err := w.install().SlackUsersOf(ctx, q.TenantID, key, []domain.PrincipalID{q.Owner})
	if err != nil {
		return p, err
	}
	p.SlackUser = users[q.Owner]
	return p, nil
}

// deleteThread deletes an erased inquiry's thread: every reply (Slack refuses the app a person's
// own reply: those are counted and left, see docs/data-lifecycle.md), then the root, then
// records SlackThreadDeleted. A message already gone counts as deleted, so a retry converges.
func (w *Worker) deleteThread(ctx context.Context, api *slack.Client, q *domain.Inquiry, th threadState) error {
	// Page by page, deleting as it goes: under Slack's history limits for apps outside the
	// Marketplace (15 messages a call, one call a minute) a long thread takes several runs. Each
	// page examined is recorded (SlackThreadDeleteProgress) before the next is read, and a run
	// resumes after the last reply recorded, so replies the app may not delete are read once, not
	// as every run's first page.
	kept, cursor, oldest, rev := 0, "", "", th.Revision
	if th.DeletingTS == th.TS && th.DeletedThrough != "" {
		kept, oldest = th.DeleteKept, th.DeletedThrough
	}
	for {
		msgs, more, next, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: th.Channel, Timestamp: th.TS, Cursor: cursor, Oldest: oldest, Limit: 200,
		})
		if slackeffects.Classify(err).Code == "thread_not_found" {
			break
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Timestamp == th.TS {
				continue
			}
			_, _, err := api.DeleteMessageContext(ctx, th.Channel, m.Timestamp)
			switch f := slackeffects.Classify(err); {
			case err == nil, f.Class == slackeffects.ClassGone:
			case f.Code == "cant_delete_message":
				kept++
			default:
				return err
			}
		}
		if !more || next == "" {
			break
		}
		cursor = next
		through := ""
		for _, m := range msgs {
			if m.Timestamp != th.TS && tsAfter(m.Timestamp, through) {
				through = m.Timestamp
			}
		}
		if through == "" {
			continue
		}
		res, err := w.Effects.Record(ctx, Stream(q.TenantID, q.ID), rev, q.TenantID, fmt.Sprintf("slack:delete/%s/%s/%s/through/%s", q.TenantID, q.ID, th.TS, through),
			"SlackThreadDeleteProgress", SlackThreadDeleteProgress{Channel: th.Channel, TS: th.TS, Through: through, Kept: kept})
		if err != nil {
			return err
		}
		rev = int64(res.NextRevision)
	}
	if _, _, err := api.DeleteMessageContext(ctx, th.Channel, th.TS); err != nil && slackeffects.Classify(err).Class != slackeffects.ClassGone {
		return err
	}
	_, err := w.Effects.Record(ctx, Stream(q.TenantID, q.ID), rev, q.TenantID, fmt.Sprintf("slack:delete/%s/%s/%s", q.TenantID, q.ID, th.TS),
		"SlackThreadDeleted", SlackThreadDeleted{Channel: th.Channel, TS: th.TS, Version: q.Version, Kept: kept})
	return err
}

// tsAfter reports whether Slack timestamp a ("seconds.micros") is later than b; every ts is
// after "".
func tsAfter(a, b string) bool {
	if b == "" {
		return a != ""
	}
	ai, af, _ := strings.Cut(a, ".")
	bi, bf, _ := strings.Cut(b, ".")
	if len(ai) != len(bi) {
		return len(ai) > len(bi)
	}
	if ai != bi {
		return ai > bi
	}
	return af > bf
}
