package slackeffects_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/slacktest"
	"github.com/casebook/casebook/internal/sqldb"
)

const channel = "C0OPS000001"

var (
	threadKind = threads.SyncArgs{}.Kind()
	listKind   = lists.SyncArgs{}.Kind()
)

// bundle is a tenant with a thread destination and an active List on one installation.
type bundle struct {
	app    *app.App
	fake   *fakeslack.Server
	clock  *apptest.Clock
	tenant domain.TenantID
	op     domain.Principal
	list   fakeslack.ListInfo
	key    string // installation key
}

func eachBackend(t *testing.T, cfg func(*app.Config), fn func(t *testing.T, b *bundle)) {
	t.Helper()
	apptest.EachBackend(t, func(t *testing.T, c app.Config) {
		if cfg != nil {
			cfg(&c)
		}
		fn(t, setup(t, c))
	})
}

func setup(t *testing.T, cfg app.Config) *bundle {
	t.Helper()
	cfg.Logger, cfg.SlackPollInterval = slog.New(slog.DiscardHandler), 20*time.Millisecond
	e := slacktest.New(t, cfg, slacktest.Options{Fake: fakeslack.Options{Channels: []string{channel}},
		Destination: channel, Clearance: "internal"})
	li, err := e.Fake.CreateList("Inquiries", apptest.BoardColumns()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.Lists.Store.Activate(t.Context(), lists.ActivateRequest{Tenant: e.Tenant, List: li.ID, Clearance: "internal", RemoveAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return &bundle{app: e.App, fake: e.Fake, clock: e.Clock, tenant: e.Tenant, op: e.Operator, list: li, key: e.Installation.Key}
}

func (b *bundle) jobs(t *testing.T, kind string) []*rivertype.JobRow {
	t.Helper()
	return apptest.Jobs(t, b.app.Effects.Client(), kind)
}

// job returns the only job of kind.
func (b *bundle) job(t *testing.T, kind string) *rivertype.JobRow {
	t.Helper()
	js := b.jobs(t, kind)
	if len(js) != 1 {
		t.Fatalf("%d %s jobs, want 1", len(js), kind)
	}
	return js[0]
}

// workLast runs the newest job of each kind and returns its error by kind.
func (b *bundle) workLast(t *testing.T, kinds ...string) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, k := range kinds {
		js := b.jobs(t, k)
		out[k] = b.app.Effects.WorkJob(t.Context(), js[len(js)-1])
	}
	return out
}

func (b *bundle) writes() map[string]int {
	out := map[string]int{}
	for _, m := range []string{"chat.postMessage", "chat.update", "slackLists.items.create", "slackLists.items.update"} {
		out[m] = b.fake.CallCount(m)
	}
	return out
}

// eventLog keeps every River event seen, so waiting for one never loses another.
type eventLog struct {
	ch   <-chan *river.Event
	seen []*river.Event
}

// waitFor returns the first event of job id of kind, seen or coming (30 s at most).
func (l *eventLog) waitFor(t *testing.T, id int64, kind river.EventKind) *river.Event {
	t.Helper()
	return l.wait(t, id, func(ev *river.Event) bool { return ev.Kind == kind })
}

// waitForAny returns the first event of job id, seen or coming (30 s at most).
func (l *eventLog) waitForAny(t *testing.T, id int64) *river.Event {
	t.Helper()
	return l.wait(t, id, func(*river.Event) bool { return true })
}

func (l *eventLog) wait(t *testing.T, id int64, match func(*river.Event) bool) *river.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for i := 0; ; i++ {
		for ; i < len(l.seen); i++ {
			if ev := l.seen[i]; ev.Job.ID == id && match(ev) {
				return ev
			}
		}
		select {
		case ev := <-l.ch:
			l.seen = append(l.seen, ev)
			i--
		case <-deadline:
			t.Fatalf("job %d: no such event", id)
			return nil
		}
	}
}

func snoozed(err error) bool {
	var s *river.JobSnoozeError
	return errors.As(err, &s)
}

// TestThreadAndListFailIndependently: one inquiry has a thread and a row in an active List. When
// only one of the two writes fails, the other completes on its first attempt and is never run
// again; only the failed one is retried by River, and it completes once the fault is gone (after
// reconciling its unknown first attempt, so no second root or row appears).
func TestThreadAndListFailIndependently(t *testing.T) {
	t.Parallel()
	for _, failing := range []string{"chat.postMessage", "slackLists.items.create"} {
		t.Run(failing, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, nil, func(t *testing.T, b *bundle) {
				ctx := t.Context()
				id := apptest.Intake(t, b.app, b.tenant, "k1")
				apptest.CatchUp(t, b.app)
				th, li := b.job(t, threadKind), b.job(t, listKind)
				bad, good := th, li
				if failing == "slackLists.items.create" {
					bad, good = li, th
				}
				b.fake.AddRule(fakeslack.Rule{Method: failing, Fault: fakeslack.HTTPStatus(503), Times: 1})
				c := b.app.Effects.Client()
				ch, cancel := c.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
				defer cancel()
				events := &eventLog{ch: ch}
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Stop(context.WithoutCancel(ctx)) })
				events.waitFor(t, good.ID, river.EventKindJobCompleted)
				failed := events.waitFor(t, bad.ID, river.EventKindJobFailed)
				if st := failed.Job.State; st != rivertype.JobStateRetryable && st != rivertype.JobStateAvailable {
					t.Fatalf("failed job state = %s, want to be retried", st)
				}
				hs, err := b.app.Effects.Health(ctx, b.tenant, id)
				if err != nil || len(hs) != 2 {
					t.Fatalf("health = %+v, %v", hs, err)
				}
				for _, h := range hs {
					want := slackeffects.Class("")
					if h.Target.Kind == bad.Kind {
						want = slackeffects.ClassUnknown
					}
					if h.ErrorClass != want {
						t.Fatalf("%s health class = %q, want %q", h.Target.Kind, h.ErrorClass, want)
					}
				}
				b.clock.Advance(2 * time.Minute) // the failed attempt is no longer in flight: reconcile it
				events.waitFor(t, bad.ID, river.EventKindJobCompleted)
				if n := len(b.fake.Messages(channel)); n != 1 {
					t.Fatalf("%d roots, want 1", n)
				}
				if n := len(b.fake.Rows(b.list.ID)); n != 1 {
					t.Fatalf("%d rows, want 1", n)
				}
				for _, j := range []*rivertype.JobRow{good, bad} {
					got, err := c.JobGet(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					want := 1
					if j.ID == bad.ID {
						want = 2
					}
					if got.State != rivertype.JobStateCompleted || got.Attempt != want {
						t.Fatalf("%s job: %s after %d attempts, want completed after %d", got.Kind, got.State, got.Attempt, want)
					}
				}
			})
		})
	}
}

// TestUninstallStopsEveryKind: after app_uninstalled (the guard's installation-wide circuit, which
// package callbacks opens on the event), neither the thread nor the List row is written: both jobs
// snooze with zero Slack calls. Closing the installation's circuit lets both through again.
func TestUninstallStopsEveryKind(t *testing.T) {
	t.Parallel()
	eachBackend(t, nil, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		id := apptest.Intake(t, b.app, b.tenant, "k1")
		apptest.CatchUp(t, b.app)
		for k, err := range b.workLast(t, threadKind, listKind) {
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
		}
		if err := b.app.Effects.Guard.DisableInstallation(ctx, b.tenant, b.key, "app_uninstalled"); err != nil {
			t.Fatal(err)
		}
		apptest.Transition(t, b.app, b.op, id, domain.StatusTriaged, domain.PriorityHigh)
		apptest.CatchUp(t, b.app)
		before, calls := b.writes(), b.fake.CallCount("slackLists.items.list")
		for k, err := range b.workLast(t, threadKind, listKind) {
			if !snoozed(err) {
				t.Fatalf("%s after uninstall: %v, want a snooze", k, err)
			}
		}
		if after := b.writes(); !equal(after, before) || b.fake.CallCount("slackLists.items.list") != calls {
			t.Fatalf("Slack calls after uninstall: %v, before %v", after, before)
		}
		cs, err := b.app.Effects.Guard.Circuits(ctx, b.tenant)
		if err != nil || len(cs) != 1 || cs[0].Channel != "*" || !cs[0].Open || cs[0].Reason != "app_uninstalled" {
			t.Fatalf("circuits = %+v, %v", cs, err)
		}
		if _, g, err := b.app.Effects.Stats(ctx); err != nil || g.InstallationCircuitsOpen != 1 || g.DestinationCircuitsOpen != 0 {
			t.Fatalf("guard stats = %+v, %v", g, err)
		}
		if _, err := b.app.Effects.Guard.CloseCircuit(ctx, b.tenant, "*"); err != nil {
			t.Fatal(err)
		}
		for k, err := range b.workLast(t, threadKind, listKind) {
			if err != nil {
				t.Fatalf("%s after the circuit closed: %v", k, err)
			}
		}
		after := b.writes()
		if after["chat.update"] != before["chat.update"]+1 || after["slackLists.items.update"] != before["slackLists.items.update"]+1 {
			t.Fatalf("writes after the circuit closed: %v, before %v", after, before)
		}
	})
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// probeArgs is a kind that does nothing: the second runtime below needs a queue to start.
type probeArgs struct{}

func (probeArgs) Kind() string                                                { return "test_probe" }
func (probeArgs) EffectRef() slackeffects.Ref                                 { return slackeffects.Ref{} }
func (probeArgs) Plan(context.Context, probeArgs) (*slackeffects.Plan, error) { return nil, nil }

// TestDeadLetterSurvivesCleaner: a dead letter (discarded after its attempts) and a quarantined
// effect (cancelled) are still there, listed, after River's job cleaner has run 30 days after they
// were finalized; a completed job of the same run is gone (the cleaner did run). An operator's
// cancel of the dead letter keeps it, cancelled. River's cleaner
// reads the wall clock, not Config.Test.Time (river v0.51.2, internal/maintenance/job_cleaner.go),
// so the jobs' finalized_at is moved 30 days back instead of moving the clock 30 days ahead.
func TestDeadLetterSurvivesCleaner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(c *app.Config) { c.SlackMaxAttempts = 1 }, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		b.fake.AddRule(fakeslack.Rule{Method: "chat.postMessage", Fault: fakeslack.HTTPStatus(503), Times: -1})
		b.fake.AddRule(fakeslack.Rule{Method: "slackLists.items.create", Fault: fakeslack.SlackError("invalid_arguments"), Times: -1})
		apptest.Intake(t, b.app, b.tenant, "k1")
		apptest.Intake(t, b.app, b.tenant, "k2")
		apptest.CatchUp(t, b.app)
		ths, lis := b.jobs(t, threadKind), b.jobs(t, listKind)
		if len(ths) != 2 || len(lis) != 2 {
			t.Fatalf("%d thread and %d list jobs, want 2 and 2", len(ths), len(lis))
		}
		b.fake.ClearFaults()
		b.fake.AddRule(fakeslack.Rule{Method: "chat.postMessage", Fault: fakeslack.HTTPStatus(503), Times: 1})
		b.fake.AddRule(fakeslack.Rule{Method: "slackLists.items.create", Fault: fakeslack.SlackError("invalid_arguments"), Times: 1})
		c := b.app.Effects.Client()
		ch, cancel := c.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
		defer cancel()
		events := &eventLog{ch: ch}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		// Which of the two jobs of a kind meets the one fault depends on which a worker takes first.
		outcome := map[int64]river.EventKind{}
		for _, j := range append(ths, lis...) {
			outcome[j.ID] = events.waitForAny(t, j.ID).Kind
		}
		var dead, quarantined, completed int64
		for _, j := range ths {
			switch outcome[j.ID] {
			case river.EventKindJobFailed:
				dead = j.ID
			case river.EventKindJobCompleted:
				completed = j.ID
			}
		}
		for _, j := range lis {
			if outcome[j.ID] == river.EventKindJobCancelled {
				quarantined = j.ID
			}
		}
		if dead == 0 || quarantined == 0 || completed == 0 {
			t.Fatalf("outcomes = %v", outcome)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		list := func() map[int64]string {
			es, err := b.app.Effects.Effects(ctx, b.tenant, slackeffects.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			out := map[int64]string{}
			for _, e := range es {
				out[e.ID] = e.Disposition
			}
			return out
		}
		if got := list(); got[dead] != slackeffects.DispositionDeadLetter || got[quarantined] != slackeffects.DispositionQuarantined {
			t.Fatalf("dispositions before the cleaner = %v", got)
		}
		ks, _, err := b.app.Effects.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			want := map[string][2]int{threadKind: {1, 0}, listKind: {0, 1}}[k.Kind] // dead, quarantined
			if k.Dead != want[0] || k.Quarantined != want[1] {
				t.Fatalf("%s stats = %+v, want %d dead and %d quarantined", k.Kind, k, want[0], want[1])
			}
		}

		shift := `UPDATE river_job SET finalized_at = finalized_at - interval '30 days' WHERE finalized_at IS NOT NULL`
		if b.app.DB.Dialect == sqldb.SQLite {
			shift = `UPDATE river_job SET finalized_at = strftime('%Y-%m-%d %H:%M:%f', finalized_at, '-30 days') WHERE finalized_at IS NOT NULL`
		}
		if _, err := b.app.DB.ExecContext(ctx, shift); err != nil {
			t.Fatal(err)
		}
		// A second process's runtime: its River client is the leader that runs the cleaner.
		rt, err := slackeffects.New(ctx, b.app.DB, b.app.Slack, b.app.Store, b.clock.Now, slackeffects.Config{
			Logger: slog.New(slog.DiscardHandler), FetchPollInterval: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := slackeffects.Register[probeArgs](rt, probeArgs{}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Open(); err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Stop(context.WithoutCancel(ctx)) })
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, err := c.JobGet(ctx, completed)
			if errors.Is(err, rivertype.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("River's cleaner did not delete the completed job within 90 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		got := list()
		if got[dead] != slackeffects.DispositionDeadLetter || got[quarantined] != slackeffects.DispositionQuarantined {
			t.Fatalf("dispositions after the cleaner ran 30 days ahead = %v", got)
		}
		// An operator gives the dead letter up: it stays, cancelled (River's JobCancel leaves a
		// finalized job as it is).
		e, err := b.app.Effects.Cancel(ctx, b.tenant, dead)
		if err != nil || e.State != rivertype.JobStateCancelled || e.Disposition != slackeffects.DispositionCancelled {
			t.Fatalf("cancel of a dead letter = %+v, %v", e, err)
		}
	})
}
