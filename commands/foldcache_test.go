package commands_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sealed"
)

// replicas returns three handlers over one sealed store: a and c each with their own fold cache
// (two replicas), full without one (the reference), all with one advancing clock.
func replicas(t testing.TB, tb *testBundle) (a, c, full *commands.Handler) {
	t.Helper()
	keys, err := sealed.NewKeys(t.Context(), tb.db, nil, bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	store := sealed.New(tb.store, keys)
	var tick atomic.Int64
	now := func() time.Time {
		return time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(tick.Add(1)) * 90 * time.Second)
	}
	var seq atomic.Int64
	mk := func(folds *commands.FoldCache) *commands.Handler {
		return &commands.Handler{Store: store, Principals: tb.tenancy, Secret: []byte("test-secret"), Now: now,
			NewID: func() string { return fmt.Sprintf("id-%d", seq.Add(1)) }, Keys: keys, Folds: folds}
	}
	return mk(commands.NewFoldCache(0)), mk(commands.NewFoldCache(0)), mk(nil)
}

// TestFoldCacheMatchesFullFold: commands executed alternately on two replicas with fold caches
// load exactly what a fold of the whole stream loads after every step (personal fields and
// follow-up notes included), a stale cache catches up, an idempotency key used before the cached
// revision still replays, the cache never holds personal data, and after an erasure on one
// replica the other loads the inquiry erased.
func TestFoldCacheMatchesFullFold(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	a, c, full := replicas(t, tb)
	in := intake("fold-1")
	in.Tenant, in.ExternalID = tb.tenant, "cust-4711"
	in.Submitter = &tb.admin
	res, err := a.Intake(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	id := res.InquiryID
	stream := eventstore.InquiryStream(tb.tenant, id)
	op := tb.ops[0]
	target := func(key string) commands.Target {
		return commands.Target{Tenant: tb.tenant, InquiryID: id, Actor: op, IdempotencyKey: key}
	}
	steps := []func(h *commands.Handler) error{
		func(h *commands.Handler) error {
			_, err := h.Claim(ctx, commands.Claim{Target: target("")})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.AddNote(ctx, commands.AddNote{Target: target("note-key"), Body: "Ada called"})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target("fu-1"), In: 2 * time.Hour, Note: "call Ada at home"})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target("fu-2"), In: 3 * time.Hour})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.AddNote(ctx, commands.AddNote{Target: target(""), Body: "second note"})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.Transition(ctx, commands.Transition{Target: target(""), To: domain.StatusWaiting, Reason: "customer"})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target("fu-3"), In: time.Hour, Note: "ask Ada again"})
			return err
		},
		func(h *commands.Handler) error {
			_, err := h.Transition(ctx, commands.Transition{Target: target(""), To: domain.StatusInProgress})
			return err
		},
	}
	check := func(step string) {
		t.Helper()
		want, err := full.Load(ctx, tb.tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]*commands.Handler{"a": a, "c": c} {
			got, err := h.Load(ctx, tb.tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s: replica %s differs from the full fold: %s", step, name, diff)
			}
			cached, notes := commands.CachedFold(h.Folds, stream)
			if cached == nil || cached.Version != want.Version {
				t.Fatalf("%s: replica %s caches %v", step, name, cached)
			}
			b, _ := json.Marshal(cached)
			for _, personal := range []string{"Ada", "ada@example.com", "Broken", "It broke", "cust-4711"} {
				if strings.Contains(string(b), personal) {
					t.Fatalf("%s: replica %s caches %q: %s", step, name, personal, b)
				}
			}
			for job := range notes {
				if _, ok := cached.FollowUps[job]; !ok {
					t.Fatalf("%s: a note revision of %s, which is not pending", step, job)
				}
			}
		}
	}
	check("intake")
	for i, step := range steps {
		h := a
		if i%2 == 1 {
			h = c
		}
		if err := step(h); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		check(fmt.Sprint("step ", i))
	}
	if got, _ := a.Load(ctx, tb.tenant, id); got.FollowUps == nil || len(got.FollowUps) != 3 {
		t.Fatalf("follow-ups %v", got.FollowUps)
	}
	// The key was recorded before both replicas' cached revisions: a retry replays on each as
	// on the full fold, and the same key with another body is refused on each.
	want, err := full.AddNote(ctx, commands.AddNote{Target: target("note-key"), Body: "Ada called"})
	if err != nil || !want.Replayed {
		t.Fatalf("replayed note: %+v %v", want, err)
	}
	for _, h := range []*commands.Handler{a, c} {
		if r, err := h.AddNote(ctx, commands.AddNote{Target: target("note-key"), Body: "Ada called"}); err != nil || r != want {
			t.Fatalf("replayed note: %+v %v, want %+v", r, err, want)
		}
		if _, err := h.AddNote(ctx, commands.AddNote{Target: target("note-key"), Body: "other"}); !errors.Is(err, domain.ErrIdempotencyMismatch) {
			t.Fatalf("reused key: %v", err)
		}
	}
	admin := commands.Target{Tenant: tb.tenant, InquiryID: id, Actor: tb.admin}
	if _, err := c.Erase(ctx, commands.Erase{Target: admin}); err != nil {
		t.Fatal(err)
	}
	check("erased")
	got, _ := a.Load(ctx, tb.tenant, id)
	if !got.Erased || got.Requester.Name != domain.Erased || got.Subject != domain.Erased || got.ExternalID != domain.Erased {
		t.Fatalf("erased inquiry reads %+v", got)
	}
}

// BenchmarkCommandStreamLength measures a command (a claim by the owner: load, idempotency check,
// decision) on an inquiry of 20 and of 2,000 events, with the fold cache and without.
func BenchmarkCommandStreamLength(b *testing.B) {
	for _, events := range []int{20, 2000} {
		tb := setupB(b)
		a, _, full := replicas(b, tb)
		in := intake("bench")
		in.Tenant = tb.tenant
		res, err := a.Intake(b.Context(), in)
		if err != nil {
			b.Fatal(err)
		}
		target := commands.Target{Tenant: tb.tenant, InquiryID: res.InquiryID, Actor: tb.ops[0]}
		if _, err := a.Claim(b.Context(), commands.Claim{Target: target}); err != nil {
			b.Fatal(err)
		}
		for i := 3; i < events; i++ {
			if _, err := a.AddNote(b.Context(), commands.AddNote{Target: target, Body: fmt.Sprint("note ", i)}); err != nil {
				b.Fatal(err)
			}
		}
		for name, h := range map[string]*commands.Handler{"cached": a, "uncached": full} {
			b.Run(fmt.Sprintf("events=%d/%s", events, name), func(b *testing.B) {
				for b.Loop() {
					r, err := h.Claim(b.Context(), commands.Claim{Target: target})
					if err != nil || r.Version != uint64(events) {
						b.Fatalf("claim: %+v %v", r, err)
					}
				}
			})
		}
	}
}
