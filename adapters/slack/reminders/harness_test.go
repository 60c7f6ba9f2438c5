package reminders_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/reminders"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/slacktest"
)

const (
	channel    = "C0OPS000001"
	escChannel = "C0ONCALL001"
	olgaSlack  = "U0OLGA0001"
	bobSlack   = "U0BOB00001"
)

type bundle struct {
	app    *app.App
	fake   *fakeslack.Server
	clock  *apptest.Clock
	tenant domain.TenantID
	admin  domain.Principal
	olga   domain.Principal // operator, linked
	bob    domain.Principal // operator, linked
	carl   domain.Principal // operator, not linked
	worked map[int64]bool
}

// setup opens the app on cfg with a fake Slack, a thread destination of the given clearance, two
// linked operators and an unlinked one; the ticker is driven by hand.
func setup(t *testing.T, cfg app.Config, clearance string) *bundle {
	t.Helper()
	return setupWith(t, cfg, clearance, fakeslack.Options{})
}

// setupWith is setup with a fake configured by opts (its channels and clock are the harness's).
func setupWith(t *testing.T, cfg app.Config, clearance string, opts fakeslack.Options) *bundle {
	t.Helper()
	cfg.PublicURL, cfg.DueTick, cfg.Logger = "https://casebook.example", -1, slog.New(slog.DiscardHandler)
	opts.Channels = []string{channel, escChannel}
	e := slacktest.New(t, cfg, slacktest.Options{Start: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Fake: opts, FakeOnClock: true,
		Destination: channel, Clearance: clearance})
	b := &bundle{app: e.App, fake: e.Fake, clock: e.Clock, tenant: e.Tenant, admin: e.Admin, olga: e.Operator, worked: map[int64]bool{}}
	b.bob, _ = e.NewOperator(t, "Bob")
	b.carl, _ = e.NewOperator(t, "Carl Unlinked")
	e.Link(t, olgaSlack, b.olga)
	e.Link(t, bobSlack, b.bob)
	return b
}

func (b *bundle) escalateTo(t *testing.T, clearance string) {
	t.Helper()
	if _, err := b.app.Slack.SetEscalationDestination(t.Context(), slackinstall.EscalationRequest{Tenant: b.tenant, Channel: escChannel,
		Clearance: clearance, By: string(b.admin.ID)}); err != nil {
		t.Fatal(err)
	}
}

// sync projects the log, works every Slack job not worked yet (threads first), and projects
// again; it returns the errors of the reminder and escalation jobs.
func (b *bundle) sync(t *testing.T) []error {
	t.Helper()
	return b.work(t, threads.SyncArgs{}.Kind(), reminders.ReminderArgs{}.Kind(), reminders.EscalationArgs{}.Kind())
}

// work is sync for the given kinds only.
func (b *bundle) work(t *testing.T, kinds ...string) []error {
	t.Helper()
	var errs []error
	for range 2 {
		apptest.CatchUp(t, b.app)
		for _, kind := range kinds {
			for _, j := range apptest.Jobs(t, b.app.Effects.Client(), kind) {
				if b.worked[j.ID] {
					continue
				}
				b.worked[j.ID] = true
				err := b.app.Effects.WorkJob(t.Context(), j)
				if kind == (threads.SyncArgs{}).Kind() && err != nil {
					t.Fatalf("thread job: %v", err)
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	apptest.CatchUp(t, b.app)
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// tick runs one due-job tick after the projections caught up.
func (b *bundle) tick(t *testing.T) {
	t.Helper()
	apptest.CatchUp(t, b.app)
	if _, err := b.app.Ticker.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	apptest.CatchUp(t, b.app)
}

func (b *bundle) target(id domain.InquiryID, actor domain.Principal) commands.Target {
	return commands.Target{Tenant: b.tenant, InquiryID: id, Actor: actor}
}

// root returns the inquiry's root message in the channel.
func (b *bundle) root(t *testing.T, id domain.InquiryID) fakeslack.Message {
	t.Helper()
	r, err := b.app.Threads.Root(t.Context(), b.tenant, id)
	if err != nil || r.TS == "" {
		t.Fatalf("no root for %s: %+v %v", id, r, err)
	}
	m, ok := b.fake.Message(channel, r.TS)
	if !ok {
		t.Fatalf("root %s not in the channel", r.TS)
	}
	return m
}

// reminderReplies returns the root's replies that are reminders (not the thread's updates).
func (b *bundle) reminderReplies(t *testing.T, id domain.InquiryID) []fakeslack.Message {
	t.Helper()
	var out []fakeslack.Message
	for _, m := range b.root(t, id).Replies {
		if strings.HasPrefix(m.Text, "Follow-up due") || strings.HasPrefix(m.Text, "SLA ") {
			out = append(out, m)
		}
	}
	return out
}

// raw is v as JSON, without HTML escaping (so "<@U…>" reads as Slack sees it).
func raw(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
