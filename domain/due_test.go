package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

func apply(q *domain.Inquiry, at time.Time, evs []domain.Event, err error) error {
	if err != nil {
		return err
	}
	for _, e := range evs {
		q.Apply(e, at)
	}
	return nil
}

// TestSLAClock: the first-response clock stops at the first operator action; the resolution clock
// stands still while waiting and while resolved, and runs again after; closing clears both.
func TestSLAClock(t *testing.T) {
	t.Parallel()
	p := mustPolicy(t, `{"time_zone":"UTC","targets":{"normal":{"first_response":"1h","resolution":"8h"}},"warning_at":0.5}`)
	q := at(t, domain.StatusNew)
	got := p.SLA(q)
	want := domain.SLATimes{FirstResponseDueAt: t0.Add(time.Hour), FirstResponseWarnAt: t0.Add(30 * time.Minute),
		ResolutionDueAt: t0.Add(8 * time.Hour), ResolutionWarnAt: t0.Add(4 * time.Hour)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("new: %s", diff)
	}
	gen := q.SLAGeneration
	op := operator("p1")
	step := func(at time.Time, to domain.Status, reason string) {
		t.Helper()
		evs, err := q.Transition(op, to, reason, "")
		if err := apply(q, at, evs, err); err != nil {
			t.Fatal(err)
		}
	}
	step(t0.Add(20*time.Minute), domain.StatusTriaged, "")
	if q.FirstRespondedAt != t0.Add(20*time.Minute) || q.SLAGeneration == gen {
		t.Fatalf("first response %v, generation %d", q.FirstRespondedAt, q.SLAGeneration)
	}
	step(t0.Add(time.Hour), domain.StatusInProgress, "")
	step(t0.Add(2*time.Hour), domain.StatusWaiting, "customer")
	if got := p.SLA(q); !got.FirstResponseDueAt.IsZero() || !got.ResolutionDueAt.IsZero() {
		t.Fatalf("waiting: %+v", got)
	}
	step(t0.Add(5*time.Hour), domain.StatusInProgress, "")
	if got := p.SLA(q).ResolutionDueAt; !got.Equal(t0.Add(11 * time.Hour)) {
		t.Fatalf("after 3h waiting: resolution due %v, want %v", got, t0.Add(11*time.Hour))
	}
	step(t0.Add(6*time.Hour), domain.StatusResolved, "")
	if got := p.SLA(q); got != (domain.SLATimes{}) {
		t.Fatalf("resolved: %+v", got)
	}
	step(t0.Add(7*time.Hour), domain.StatusInProgress, "") // reopened: the hour resolved did not count
	if got := p.SLA(q).ResolutionDueAt; !got.Equal(t0.Add(12 * time.Hour)) {
		t.Fatalf("reopened: resolution due %v, want %v", got, t0.Add(12*time.Hour))
	}
}

// TestSLAClockPausedAfterDueKeepsDue: a pause that starts after the due time does not move it.
func TestSLAClockPausedAfterDueKeepsDue(t *testing.T) {
	t.Parallel()
	p := mustPolicy(t, `{"time_zone":"UTC","targets":{"normal":{"resolution":"2h"}}}`)
	q := at(t, domain.StatusInProgress)
	evs, err := q.Transition(operator("p1"), domain.StatusWaiting, "customer", "")
	if err := apply(q, t0.Add(3*time.Hour), evs, err); err != nil {
		t.Fatal(err)
	}
	if got := p.SLA(q).ResolutionDueAt; !got.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("due %v", got)
	}
}

// TestFireDue: each kind appends its event once and nothing once its reason has gone.
func TestFireDue(t *testing.T) {
	t.Parallel()
	op := operator("p1")
	now := t0.Add(time.Minute)
	t.Run("follow-up fires once", func(t *testing.T) {
		t.Parallel()
		q := at(t, domain.StatusInProgress)
		evs, err := q.ScheduleFollowUp(op, "j1", now.Add(time.Hour), now, "call back")
		if err := apply(q, now, evs, err); err != nil {
			t.Fatal(err)
		}
		if !q.NextFollowUpAt().Equal(now.Add(time.Hour)) {
			t.Fatalf("next follow-up %v", q.NextFollowUpAt())
		}
		j := domain.DueJob{ID: "j1", Kind: domain.KindFollowUp}
		evs = q.FireDue(j, []domain.PrincipalID{"p1"})
		want := []domain.Event{domain.FollowUpDue{JobID: "j1", DueAt: now.Add(time.Hour).UTC(), Recipients: []domain.PrincipalID{"p1"}}}
		if diff := cmp.Diff(want, evs); diff != "" {
			t.Fatal(diff)
		}
		_ = apply(q, now, evs, nil)
		if again := q.FireDue(j, nil); again != nil {
			t.Fatalf("fired twice: %v", again)
		}
	})
	t.Run("cancelled or closed follow-up does nothing", func(t *testing.T) {
		t.Parallel()
		q := at(t, domain.StatusInProgress)
		for _, id := range []string{"j1", "j2"} {
			evs, err := q.ScheduleFollowUp(op, id, now.Add(time.Hour), now, "")
			if err := apply(q, now, evs, err); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := q.CancelFollowUp(op, "j1")
		if err := apply(q, now, evs, err); err != nil {
			t.Fatal(err)
		}
		if evs := q.FireDue(domain.DueJob{ID: "j1", Kind: domain.KindFollowUp}, nil); evs != nil {
			t.Fatalf("cancelled follow-up fired: %v", evs)
		}
		if _, err := q.CancelFollowUp(op, "j1"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("cancel twice: %v", err)
		}
		evs, err = q.Transition(op, domain.StatusResolved, "", "")
		if err := apply(q, now, evs, err); err != nil {
			t.Fatal(err)
		}
		if evs := q.FireDue(domain.DueJob{ID: "j2", Kind: domain.KindFollowUp}, nil); evs != nil {
			t.Fatalf("follow-up fired after resolution: %v", evs)
		}
	})
	t.Run("sla jobs of an older generation do nothing", func(t *testing.T) {
		t.Parallel()
		q := at(t, domain.StatusNew)
		warn := domain.DueJob{ID: "w", Kind: domain.KindSLAWarning, Target: domain.TargetFirstResponse, DueAt: t0.Add(time.Hour), Generation: q.SLAGeneration}
		if evs := q.FireDue(warn, nil); len(evs) != 1 {
			t.Fatalf("warning: %v", evs)
		}
		evs, err := q.Claim(op)
		if err := apply(q, now, evs, err); err != nil {
			t.Fatal(err)
		}
		if evs := q.FireDue(warn, nil); evs != nil {
			t.Fatalf("warning after the claim: %v", evs)
		}
	})
	t.Run("breach and escalation happen once", func(t *testing.T) {
		t.Parallel()
		q := at(t, domain.StatusInProgress)
		breach := domain.DueJob{ID: "b", Kind: domain.KindSLABreach, Target: domain.TargetResolution, DueAt: t0.Add(8 * time.Hour), Generation: q.SLAGeneration}
		esc := domain.DueJob{ID: "e", Kind: domain.KindEscalation, Target: domain.TargetResolution, Level: 1}
		if evs := q.FireDue(esc, nil); evs != nil {
			t.Fatalf("escalation before the breach: %v", evs)
		}
		evs := q.FireDue(breach, nil)
		if diff := cmp.Diff([]domain.Event{domain.SLABreached{Target: domain.TargetResolution, DueAt: t0.Add(8 * time.Hour)}}, evs); diff != "" {
			t.Fatal(diff)
		}
		_ = apply(q, now, evs, nil)
		if evs := q.FireDue(breach, nil); evs != nil {
			t.Fatalf("breached twice: %v", evs)
		}
		evs = q.FireDue(esc, nil)
		if diff := cmp.Diff([]domain.Event{domain.InquiryEscalated{Level: 1, Target: domain.TargetResolution, Reason: "sla_breach"}}, evs); diff != "" {
			t.Fatal(diff)
		}
		_ = apply(q, now, evs, nil)
		if q.EscalationLevel != 1 || q.FireDue(esc, nil) != nil {
			t.Fatalf("level %d, or escalated twice", q.EscalationLevel)
		}
		if diff := cmp.Diff([]string{domain.TargetResolution}, q.Breached()); diff != "" {
			t.Fatal(diff)
		}
	})
}

func TestSchedulingCommands(t *testing.T) {
	t.Parallel()
	op := operator("p1")
	viewer := domain.Principal{ID: "v1", TenantID: "t1", Role: domain.RoleViewer}
	now := t0.Add(time.Minute)
	q := at(t, domain.StatusInProgress)
	if _, err := q.ScheduleFollowUp(viewer, "j", now.Add(time.Hour), now, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer: %v", err)
	}
	for name, when := range map[string]time.Time{"past": now.Add(-time.Second), "now": now, "zero": {}, "too far": now.Add(400 * 24 * time.Hour)} {
		if _, err := q.ScheduleFollowUp(op, "j", when, now, ""); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%s: %v", name, err)
		}
		if name != "zero" {
			if _, err := q.SetDueDate(op, when, now); !errors.Is(err, domain.ErrValidation) {
				t.Errorf("due %s: %v", name, err)
			}
		}
	}
	evs, err := q.SetDueDate(op, now.Add(48*time.Hour), now)
	if err := apply(q, now, evs, err); err != nil || !q.DueAt.Equal(now.Add(48*time.Hour)) {
		t.Fatalf("due date: %v %v", err, q.DueAt)
	}
	if evs, _ := q.SetDueDate(op, now.Add(48*time.Hour), now); evs != nil {
		t.Fatalf("same due date appended %v", evs)
	}
	w := domain.Principal{ID: "p2", TenantID: "t1", Role: domain.RoleViewer}
	evs, err = q.AddWatcher(op, w)
	if err := apply(q, now, evs, err); err != nil {
		t.Fatal(err)
	}
	if evs, _ := q.AddWatcher(op, w); evs != nil {
		t.Fatalf("watcher added twice: %v", evs)
	}
	if _, err := q.AddWatcher(op, domain.Principal{ID: "x", TenantID: "t2", Role: domain.RoleOperator}); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("cross-tenant watcher: %v", err)
	}
	evs, err = q.Claim(op)
	if err := apply(q, now, evs, err); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Route(op, "billing"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("operator routing an owned inquiry: %v", err)
	}
	fresh := at(t, domain.StatusNew)
	evs, err = fresh.Route(op, "billing")
	if err := apply(fresh, now, evs, err); err != nil || fresh.Team != "billing" {
		t.Fatalf("route: %v %q", err, fresh.Team)
	}
	if _, err := fresh.Route(op, "Billing Team"); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("bad team: %v", err)
	}
	if !fresh.FirstRespondedAt.IsZero() {
		t.Fatal("routing counted as a first response")
	}
}

// TestDueEventsRoundTrip: every new event encodes and decodes to itself.
func TestDueEventsRoundTrip(t *testing.T) {
	t.Parallel()
	at := t0.Add(time.Hour)
	for _, e := range []domain.Event{
		domain.FollowUpScheduled{JobID: "j", DueAt: at, By: "p1", Note: "n"}, domain.FollowUpCancelled{JobID: "j"},
		domain.DueDateSet{DueAt: at}, domain.DueDateSet{}, domain.WatcherAdded{Principal: "p2"}, domain.InquiryRouted{Team: "b", Previous: "a"},
		domain.FollowUpDue{JobID: "j", DueAt: at, Recipients: []domain.PrincipalID{"p1"}}, domain.SLAWarning{Target: "resolution", DueAt: at},
		domain.SLABreached{Target: "first_response", DueAt: at}, domain.InquiryEscalated{Level: 2, Target: "resolution", Reason: "sla_breach"},
	} {
		typ, b, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := domain.Decode(typ, domain.SchemaVersion, b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Fatalf("%s: %s", typ, diff)
		}
	}
}
