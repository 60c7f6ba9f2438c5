package reminders

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// ReminderArgs asks for the reply of the due event at Version. Unique per tenant + inquiry +
// version: one reply per job firing.
type ReminderArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	Version uint64           `json:"version"`
}

// Kind implements river.JobArgs: the reminder reply kind and its queue.
func (ReminderArgs) Kind() string { return "slack_due_reminder" }

// EffectRef implements slackeffects.Args.
func (a ReminderArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry, Version: a.Version}
}

// EscalationArgs asks for the escalation post of the InquiryEscalated at Version.
type EscalationArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	Version uint64           `json:"version"`
}

// Kind implements river.JobArgs: the escalation post kind and its queue.
func (EscalationArgs) Kind() string { return "slack_escalation_post" }

// EffectRef implements slackeffects.Args.
func (a EscalationArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry, Version: a.Version}
}

// EscalationEraseArgs asks for the deletion of an erased inquiry's escalation posts.
type EscalationEraseArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
}

// Kind implements river.JobArgs: the escalation deletion kind and its queue.
func (EscalationEraseArgs) Kind() string { return "slack_escalation_erase" }

// EffectRef implements slackeffects.Args.
func (a EscalationEraseArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry}
}

// Root is an inquiry's thread root (zero: not posted yet).
type Root struct {
	Installation string // installation key
	Channel      string
	TS           string
}

// Principals resolves a principal of a tenant (tenancy.Store); an unknown one is
// domain.ErrNotFound.
type Principals interface {
	Principal(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) (domain.Principal, error)
}

// ErrNoThread: the inquiry has no thread root in its current destination yet (the thread kind
// posts it); the reminder is retried with backoff until it has.
var ErrNoThread = errors.New("reminders: the inquiry's thread root is not posted yet")

// Service is both kinds.
type Service struct {
	Effects    *slackeffects.Runtime
	Load       slackeffects.Loader
	Principals Principals
	// Roots finds an inquiry's thread root from the log (threads.Worker.Root, adapted by the wiring).
	Roots func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (Root, error)
	// LinkBase is the console's base URL for the authenticated link ("" omits the link).
	LinkBase string
}

type reminderKind struct{ s *Service }
type escalationKind struct{ s *Service }
type escalationEraseKind struct{ s *Service }

var (
	_ slackeffects.Kind[ReminderArgs]        = reminderKind{}
	_ slackeffects.Kind[EscalationArgs]      = escalationKind{}
	_ slackeffects.Kind[EscalationEraseArgs] = escalationEraseKind{}
)

// Register adds the reminder, escalation and escalation deletion kinds to the runtime (before
// Runtime.Open).
func Register(rt *slackeffects.Runtime, s *Service) error {
	s.Effects = rt
	if err := slackeffects.Register[ReminderArgs](rt, reminderKind{s}); err != nil {
		return err
	}
	if err := slackeffects.Register[EscalationArgs](rt, escalationKind{s}); err != nil {
		return err
	}
	return slackeffects.Register[EscalationEraseArgs](rt, escalationEraseKind{s})
}

func (s *Service) install() *slackinstall.Store { return s.Effects.Install }

// dueEvent reads the inquiry's event at version (its revision version-1), decoded, and the
// follow-up note and setter of a FollowUpDue.
func (s *Service) dueEvent(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, version uint64) (domain.Event, string, error) {
	if version == 0 {
		return nil, "", nil
	}
	evs, err := s.Effects.Events.ReadStream(ctx, eventstore.InquiryStream(tenant, id), 0, 0)
	if err != nil || uint64(len(evs)) < version {
		return nil, "", err
	}
	decode := func(r eventstore.RecordedEvent) (domain.Event, error) {
		m, err := eventstore.DecodeMetadata(r.Metadata)
		if err != nil {
			return nil, err
		}
		return eventstore.DecodeEvent(r.Type, m.SchemaVersion, r.Data)
	}
	ev, err := decode(evs[version-1])
	if err != nil {
		return nil, "", err
	}
	due, ok := ev.(domain.FollowUpDue)
	if !ok {
		return ev, "", nil
	}
	for _, r := range evs[:version-1] {
		if r.Type != "FollowUpScheduled" {
			continue
		}
		e, err := decode(r)
		if err != nil {
			return nil, "", err
		}
		if f, ok := e.(domain.FollowUpScheduled); ok && f.JobID == due.JobID {
			return ev, f.Note, nil
		}
	}
	return ev, "", nil
}

// recipients resolves principals still of the tenant to their linked Slack users in the
// installation (else their display names), dropping those that are gone or may no longer read
// inquiries (a disabled principal), as a follow-up's recipients are chosen when it fires.
func (s *Service) recipients(ctx context.Context, tenant domain.TenantID, key string, ids []domain.PrincipalID) ([]Recipient, error) {
	var alive []domain.Principal
	seen := map[domain.PrincipalID]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		p, err := s.Principals.Principal(ctx, tenant, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if domain.Authorize(p, domain.ActRead) != nil {
			continue
		}
		alive = append(alive, p)
	}
	pids := make([]domain.PrincipalID, len(alive))
	for i, p := range alive {
		pids[i] = p.ID
	}
	users, err := s.install().SlackUsersOf(ctx, tenant, key, pids)
	if err != nil {
		return nil, err
	}
	out := make([]Recipient, len(alive))
	for i, p := range alive {
		out[i] = Recipient{SlackUser: users[p.ID], Name: p.Name}
	}
	return out, nil
}

// load re-reads the inquiry; a vanished one cancels the job.
func (s *Service) load(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error) {
	q, err := s.Load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !q.Exists() {
		return nil, slackeffects.Cancel(fmt.Errorf("inquiry %s: %w", id, domain.ErrNotFound))
	}
	return q, nil
}

// Plan implements slackeffects.Kind: the reminder reply.
func (k reminderKind) Plan(ctx context.Context, a ReminderArgs) (*slackeffects.Plan, error) {
	s := k.s
	q, err := s.load(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	ev, note, err := s.dueEvent(ctx, a.Tenant, a.Inquiry, a.Version)
	if err != nil {
		return nil, err
	}
	var who []domain.PrincipalID
	switch e := ev.(type) {
	case domain.FollowUpDue:
		who = e.Recipients
	case domain.SLAWarning:
		if e.Target == domain.TargetFirstResponse && !q.FirstRespondedAt.IsZero() {
			return nil, nil // met since: the warning is moot
		}
		who = append([]domain.PrincipalID{q.Owner}, q.Watchers...)
	case domain.SLABreached:
		who = append([]domain.PrincipalID{q.Owner}, q.Watchers...)
	default:
		return nil, nil // not a due event: nothing to say
	}
	if q.Status.Terminal() {
		return nil, nil // closed since it fell due: no reminder after resolution
	}
	done, err := readPosted(ctx, s.Effects.Events, a.Tenant, a.Inquiry)
	if err != nil || done.done[fmt.Sprintf("reminder/%d", a.Version)] {
		return nil, err
	}
	dest, err := s.install().DestinationFor(ctx, a.Tenant, q.Team)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil // Slack disabled for this tenant: zero I/O
	}
	if err != nil {
		return nil, err
	}
	root, err := s.Roots(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	if root.TS == "" || root.Channel != dest.Channel || root.Installation != dest.Installation.Key {
		return nil, ErrNoThread
	}
	rs, err := s.recipients(ctx, a.Tenant, dest.Installation.Key, who)
	if err != nil {
		return nil, err
	}
	r := RenderReminder(ev, dest.Clearance, rs, note)
	key := fmt.Sprintf("reminder/%s/%s/%d", a.Tenant, a.Inquiry, a.Version)
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: a.Tenant, Installation: dest.Installation.Key, Destination: dest.Channel, Inquiry: a.Inquiry},
		Installation: dest.Installation,
		Do: func(ctx context.Context, api *slack.Client) error {
			ts, adopted, err := s.postOnce(ctx, api, dest.Channel, root.TS, key, r)
			if err != nil {
				return err
			}
			_, err = s.Effects.Record(ctx, Stream(a.Tenant, a.Inquiry), done.rev, a.Tenant, "slack:"+key, "SlackReminderPosted",
				SlackReminderPosted{Version: a.Version, Channel: dest.Channel, Root: root.TS, TS: ts, Adopted: adopted})
			return err
		},
	}, nil
}

// Plan implements slackeffects.Kind: the escalation post.
func (k escalationKind) Plan(ctx context.Context, a EscalationArgs) (*slackeffects.Plan, error) {
	s := k.s
	q, err := s.load(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	ev, _, err := s.dueEvent(ctx, a.Tenant, a.Inquiry, a.Version)
	if err != nil {
		return nil, err
	}
	esc, ok := ev.(domain.InquiryEscalated)
	if !ok || q.Status.Terminal() {
		return nil, nil // not an escalation, or closed since: nobody needs paging
	}
	done, err := readPosted(ctx, s.Effects.Events, a.Tenant, a.Inquiry)
	if err != nil || done.done[fmt.Sprintf("escalation/%d", a.Version)] {
		return nil, err
	}
	dest, err := s.install().EscalationDestination(ctx, a.Tenant)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil // no escalation destination: zero I/O
	}
	if err != nil {
		return nil, err
	}
	owner, err := s.recipients(ctx, a.Tenant, dest.Installation.Key, []domain.PrincipalID{q.Owner})
	if err != nil {
		return nil, err
	}
	link := ""
	if s.LinkBase != "" {
		link = s.LinkBase + "/inquiries/r/" + url.PathEscape(q.Receipt)
	}
	r := RenderEscalation(q, esc, dest.Clearance, owner, link)
	key := fmt.Sprintf("escalation/%s/%s/%d", a.Tenant, a.Inquiry, a.Version)
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: a.Tenant, Installation: dest.Installation.Key, Destination: dest.Channel, Inquiry: a.Inquiry},
		Installation: dest.Installation,
		Do: func(ctx context.Context, api *slack.Client) error {
			ts, adopted, err := s.postOnce(ctx, api, dest.Channel, "", key, r)
			if err != nil {
				return err
			}
			_, err = s.Effects.Record(ctx, Stream(a.Tenant, a.Inquiry), done.rev, a.Tenant, "slack:"+key, "SlackEscalationPosted",
				SlackEscalationPosted{Version: a.Version, Installation: dest.Installation.Key, Channel: dest.Channel, TS: ts, Adopted: adopted})
			return err
		},
	}, nil
}

// Plan implements slackeffects.Kind: an erased inquiry's escalation posts are deleted where they
// were posted, with the installation that posted them, whatever the escalation destination is now;
// each deletion is recorded (SlackEscalationDeleted). One installation's posts per run: a post of
// another installation is left to the job's retry. Reminder replies are in the thread, which the
// thread effect deletes.
func (k escalationEraseKind) Plan(ctx context.Context, a EscalationEraseArgs) (*slackeffects.Plan, error) {
	s := k.s
	q, err := s.load(ctx, a.Tenant, a.Inquiry)
	if err != nil || !q.Erased {
		return nil, err
	}
	done, err := readPosted(ctx, s.Effects.Events, a.Tenant, a.Inquiry)
	if err != nil || len(done.escalations) == 0 {
		return nil, err
	}
	key := done.escalations[0].Installation
	in, err := s.install().InstallationOfKey(ctx, a.Tenant, key)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, slackeffects.Cancel(fmt.Errorf("erase the escalation posts of %s: their installation is gone; delete them in Slack by hand: %w", a.Inquiry, err))
	}
	if err != nil {
		return nil, err
	}
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: a.Tenant, Installation: key, Destination: done.escalations[0].Channel, Inquiry: a.Inquiry},
		Installation: in,
		Do: func(ctx context.Context, api *slack.Client) error {
			rev, others := done.rev, 0
			for _, ep := range done.escalations {
				if ep.Installation != key {
					others++
					continue
				}
				if _, _, err := api.DeleteMessageContext(ctx, ep.Channel, ep.TS); err != nil && slackeffects.Classify(err).Class != slackeffects.ClassGone {
					return err
				}
				res, err := s.Effects.Record(ctx, Stream(a.Tenant, a.Inquiry), rev, a.Tenant, fmt.Sprintf("slack:escalation-delete/%s/%s/%s", a.Tenant, a.Inquiry, ep.TS),
					"SlackEscalationDeleted", SlackEscalationDeleted{Channel: ep.Channel, TS: ep.TS})
				if err != nil {
					return err
				}
				rev = int64(res.NextRevision)
			}
			if others > 0 {
				return fmt.Errorf("erase the escalation posts of %s: %d posted by another installation are deleted by the next attempt", a.Inquiry, others)
			}
			return nil
		},
	}, nil
}

// postOnce posts r (a reply when root is set) claimed under key in the ledger. A job finding an
// earlier attempt of the key looks the message up by its metadata first and adopts it; a failure
// that proves nothing was posted releases the claim, any other keeps it so the next attempt looks
// before it posts.
func (s *Service) postOnce(ctx context.Context, api *slack.Client, channel, root, key string, r Rendered) (string, bool, error) {
	fresh, reconcile, err := s.Effects.Ledger.Claim(ctx, key, s.Effects.Timing.AttemptStale)
	if err != nil {
		return "", false, err
	}
	if !fresh && !reconcile {
		return "", false, slackeffects.Snooze(s.Effects.Timing.InFlightRecheck) // another job's post is in flight
	}
	sealer := s.install().Sealer
	if reconcile {
		var ts string
		if root != "" {
			ts, err = s.Effects.FindPostedReply(ctx, api, sealer, channel, root, key)
		} else {
			ts, err = s.Effects.FindPosted(ctx, api, sealer, channel, key)
		}
		if err != nil || ts != "" {
			return ts, ts != "", err
		}
	}
	opts := []slack.MsgOption{slack.MsgOptionText(r.Text, false), slack.MsgOptionBlocks(r.Blocks...), slackeffects.Marked(sealer, key)}
	if root != "" {
		opts = append(opts, slack.MsgOptionTS(root))
	}
	_, ts, err := api.PostMessageContext(ctx, channel, opts...)
	if err != nil && slackeffects.CertainlyNotApplied(err) {
		_ = s.Effects.Ledger.Release(ctx, key)
	}
	return ts, false, err
}
