package threads_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/slacktest"
)

const channel = "C0OPS000001"

// clock is the app's injected time, advanced by hand.
type clock = apptest.Clock

type bundle struct {
	app    *app.App
	fake   *fakeslack.Server
	clock  *clock
	tenant domain.TenantID
	admin  domain.Principal
	op     domain.Principal
	worked map[int64]bool
}

var backends = apptest.Backends

func eachBackend(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) { fn(t, setup(t, cfg, "personal")) })
}

func setup(t *testing.T, cfg app.Config, clearance string) *bundle {
	t.Helper()
	return setupWith(t, cfg, clearance, fakeslack.Options{})
}

// setupWith is setup with a fake configured by opts (its channel and clock are the harness's).
func setupWith(t *testing.T, cfg app.Config, clearance string, opts fakeslack.Options) *bundle {
	t.Helper()
	cfg.PublicURL = "https://casebook.example"
	cfg.SlackPollInterval = 20 * time.Millisecond
	opts.Channels = []string{channel}
	e := slacktest.New(t, cfg, slacktest.Options{Fake: opts, FakeOnClock: true, SigningSecret: "sig-secret",
		NoInstall: clearance == "", Destination: channel, Clearance: clearance})
	return &bundle{app: e.App, fake: e.Fake, clock: e.Clock, tenant: e.Tenant, admin: e.Admin, op: e.Operator, worked: map[int64]bool{}}
}

func (b *bundle) intake(t *testing.T, key string) domain.InquiryID {
	t.Helper()
	return apptest.Intake(t, b.app, b.tenant, key)
}

func (b *bundle) transition(t *testing.T, id domain.InquiryID, to domain.Status, priority domain.Priority) {
	t.Helper()
	apptest.Transition(t, b.app, b.op, id, to, priority)
}

// project runs every subscriber until it has applied the whole log.
func (b *bundle) project(t *testing.T) { t.Helper(); apptest.CatchUp(t, b.app) }

// jobs lists the tenant's Slack jobs in insertion order.
func (b *bundle) jobs(t *testing.T) []*rivertype.JobRow {
	t.Helper()
	return apptest.Jobs(t, b.app.Effects.Client(), threads.SyncArgs{}.Kind())
}

// work runs the worker directly on every job not worked yet and returns their results.
func (b *bundle) work(t *testing.T) []error {
	t.Helper()
	var out []error
	for _, j := range b.jobs(t) {
		if b.worked[j.ID] {
			continue
		}
		b.worked[j.ID] = true
		out = append(out, b.workJob(t.Context(), t, j))
	}
	return out
}

func (b *bundle) workJob(ctx context.Context, t *testing.T, j *rivertype.JobRow) error {
	t.Helper()
	return b.app.Effects.WorkJob(ctx, j)
}

// roots returns the top-level messages in the channel (newest first is the fake's order).
func (b *bundle) roots() []fakeslack.Message { return b.fake.Messages(channel) }

// writes counts Slack write calls.
func (b *bundle) writes() int {
	return b.fake.CallCount("chat.postMessage") + b.fake.CallCount("chat.update")
}
