package threads_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
)

func snoozed(t *testing.T, err error) time.Duration {
	t.Helper()
	var s *river.JobSnoozeError
	if !errors.As(err, &s) {
		t.Fatalf("err = %v, want a snooze", err)
	}
	return s.Duration
}

// TestRateLimitStormSharedCooldown: a 429 sets a cooldown for the destination that every job
// respects without calling Slack and without spending attempts; afterwards each inquiry gets
// exactly one root.
func TestRateLimitStormSharedCooldown(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		for _, k := range []string{"k1", "k2", "k3"} {
			b.intake(t, k)
		}
		b.project(t)
		b.fake.FailNext("chat.postMessage", fakeslack.RateLimited(30*time.Second))
		errs := b.work(t)
		for _, err := range errs {
			if d := snoozed(t, err); d <= 0 || d > 30*time.Second {
				t.Fatalf("snooze %v, want ≤ Retry-After", d)
			}
		}
		if n := b.fake.CallCount("chat.postMessage"); n != 1 {
			t.Fatalf("%d posts during the cooldown, want only the one answered 429", n)
		}
		b.clock.Advance(31 * time.Second)
		b.worked = map[int64]bool{}
		noErrors(t, b.work(t))
		if n := len(b.roots()); n != 3 {
			t.Fatalf("%d roots, want 3", n)
		}
		if n := b.fake.CallCount("chat.postMessage"); n != 4 {
			t.Fatalf("%d posts, want 4 (one refused, three applied)", n)
		}
	})
}

// TestCircuitOpensAndCloses: token_revoked opens the destination's circuit (visible, jobs wait
// without calling Slack); an operator closes it and the next job succeeds.
func TestCircuitOpensAndCloses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		b.intake(t, "k2")
		b.project(t)
		b.fake.FailNext("chat.postMessage", fakeslack.SlackError(fakeslack.CodeTokenRevoked))
		errs := b.work(t)
		snoozed(t, errs[0])
		snoozed(t, errs[1])
		if n := b.fake.CallCount("chat.postMessage"); n != 1 {
			t.Fatalf("%d posts with the circuit open, want 1", n)
		}
		cs, err := b.app.Effects.Guard.Circuits(t.Context(), b.tenant)
		if err != nil || len(cs) != 1 || !cs[0].Open || cs[0].Reason != "token_revoked" {
			t.Fatalf("circuits = %+v, %v", cs, err)
		}
		h, _ := b.app.Threads.Health(t.Context(), b.tenant, id)
		if h.State != "failed" || h.ErrorClass != string(slackeffects.ClassCircuit) {
			t.Fatalf("health = %+v", h)
		}
		if _, err := b.app.Effects.Guard.CloseCircuit(t.Context(), b.tenant, channel); err != nil {
			t.Fatal(err)
		}
		b.worked = map[int64]bool{}
		noErrors(t, b.work(t))
		if n := len(b.roots()); n != 2 {
			t.Fatalf("%d roots after close, want 2", n)
		}
		if _, err := b.app.Effects.Guard.CloseCircuit(t.Context(), "other-tenant", channel); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("another tenant closed a circuit: %v", err)
		}
	})
}

// TestCircuitClosedByProbe: after the probe interval one job goes through; its success closes it.
func TestCircuitClosedByProbe(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.intake(t, "k1")
		b.project(t)
		b.fake.FailNext("chat.postMessage", fakeslack.SlackError("not_in_channel"))
		j := b.jobs(t)[0]
		snoozed(t, b.workJob(t.Context(), t, j))
		b.clock.Advance(6 * time.Minute)
		if err := b.workJob(t.Context(), t, j); err != nil {
			t.Fatal(err)
		}
		cs, _ := b.app.Effects.Guard.Circuits(t.Context(), b.tenant)
		if len(cs) != 1 || cs[0].Open {
			t.Fatalf("circuit still open after a successful probe: %+v", cs)
		}
	})
}

// TestQuarantineBadMessage: invalid_blocks cancels that effect with a reason; others go on.
func TestQuarantineBadMessage(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		b.intake(t, "k2")
		b.project(t)
		b.fake.FailNext("chat.postMessage", fakeslack.SlackError(fakeslack.CodeInvalidBlocks))
		errs := b.work(t)
		var ce *river.JobCancelError
		if !errors.As(errs[0], &ce) || !strings.Contains(errs[0].Error(), "invalid_blocks") {
			t.Fatalf("first job: %v, want cancel with reason", errs[0])
		}
		if errs[1] != nil {
			t.Fatalf("second job: %v", errs[1])
		}
		h, _ := b.app.Threads.Health(t.Context(), b.tenant, id)
		if h.ErrorClass != string(slackeffects.ClassQuarantined) {
			t.Fatalf("health = %+v", h)
		}
	})
}

// TestNoPersonalFieldInPublicChannel: a public destination receives no contact details, subject
// or message, in root, update or reply.
func TestNoPersonalFieldInPublicChannel(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, be.Config(t), "public")
			id := b.intake(t, "k1")
			b.project(t)
			noErrors(t, b.work(t))
			b.transition(t, id, domain.StatusTriaged, domain.PriorityHigh)
			b.project(t)
			noErrors(t, b.work(t))
			raw, _ := json.Marshal(b.roots())
			for _, s := range []string{"Ada Lovelace", "ada@example.com", "Invoice twice", "Invoice 42", string(id)} {
				if strings.Contains(string(raw), s) {
					t.Errorf("public channel received %q", s)
				}
			}
			if !strings.Contains(string(raw), "CB-") {
				t.Error("public channel lacks the receipt")
			}
		})
	}
}

// TestDeadLetterAndManualRetry: a job whose attempts run out is discarded by River (the dead
// letter), invisible to other tenants; an operator's retry reconciles and posts exactly one root.
func TestDeadLetterAndManualRetry(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		id := b.intake(t, "k1")
		opts := river.InsertOpts{Queue: threads.SyncArgs{}.Kind(), MaxAttempts: 1, Tags: []string{slackeffects.TenantTag(b.tenant)}}
		ins, err := b.app.Effects.Client().Insert(ctx, threads.SyncArgs{Tenant: b.tenant, Inquiry: id, Version: 1}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		b.fake.AddRule(fakeslack.Rule{Method: "chat.postMessage", Fault: fakeslack.HTTPStatus(503), Times: -1})
		events, cancel := b.app.Effects.Client().Subscribe(river.EventKindJobFailed, river.EventKindJobCompleted)
		defer cancel()
		if err := b.app.Effects.Client().Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.app.Effects.Client().Stop(context.WithoutCancel(ctx)) })
		next := func() *river.Event {
			select {
			case ev := <-events:
				return ev
			case <-time.After(30 * time.Second):
				t.Fatal("no job event")
			}
			return nil
		}
		if ev := next(); ev.Job.State != rivertype.JobStateDiscarded {
			t.Fatalf("state = %s, want discarded", ev.Job.State)
		}
		dead, err := b.app.Effects.Effects(ctx, b.tenant, slackeffects.Filter{States: []string{"discarded"}})
		if err != nil || len(dead) != 1 || dead[0].ID != ins.Job.ID || dead[0].LastError == "" {
			t.Fatalf("dead letters = %+v, %v", dead, err)
		}
		if other, _ := b.app.Effects.Effects(ctx, "another-tenant", slackeffects.Filter{}); len(other) != 0 {
			t.Fatalf("another tenant sees %d effects", len(other))
		}
		if _, err := b.app.Effects.Retry(ctx, "another-tenant", ins.Job.ID); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("another tenant's retry: %v", err)
		}
		b.fake.ClearFaults()
		b.clock.Advance(2 * time.Minute) // the failed attempt is no longer in flight
		if _, err := b.app.Effects.Retry(ctx, b.tenant, ins.Job.ID); err != nil {
			t.Fatal(err)
		}
		if ev := next(); ev.Kind != river.EventKindJobCompleted {
			t.Fatalf("after retry: %s %s", ev.Kind, ev.Job.State)
		}
		oneRoot(t, b)
		if b.fake.CallCount("conversations.history") == 0 {
			t.Fatal("retry posted without reconciling the unknown first attempt")
		}
	})
}
