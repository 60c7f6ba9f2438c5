package app_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/projections"
)

func ids(items []app.RetentionItem) []domain.InquiryID {
	var out []domain.InquiryID
	for _, it := range items {
		out = append(out, it.Inquiry)
	}
	slices.Sort(out)
	return out
}

// TestRetentionPolicyJob drives the retention policy job with an injected clock on each backend:
// an archive records the deadline its class gives; after it passed the eligible inquiry is erased
// as system:retention with "retention:<class>" in the tombstone and its data key destroyed; a held
// one is skipped and reported; inquiries not yet due are untouched; a second sweep changes nothing;
// a policy change applies at the next sweep to inquiries archived or closed before it; a released
// hold lets the next sweep erase. A dry run previews what a later sweep would erase and erases
// nothing. A policy is validated strictly and only an admin sets it.
func TestRetentionPolicyJob(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		clock := apptest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
		cfg.Now, cfg.DueTick, cfg.RetentionTick, cfg.Logger = clock.Now, -1, -1, slog.New(slog.DiscardHandler)
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		ten, admin, op := apptest.TenantWithOperator(t, a, "acme")

		for _, bad := range []string{`{}`, `{"classes":{"Bad Name":{}}}`, `{"classes":{"x":{"archived_for":"1m"}}}`,
			`{"classes":{"x":{}},"default_class":"y"}`, `{"classes":{"x":{}},"categories":{"billing":"y"}}`, `{"classes":{"x":{}},"extra":1}`,
			`{"classes":{"x":{"archived_for":"ten days"}}}`} {
			if _, _, err := a.Commands.SetRetentionPolicy(ctx, commands.SetRetentionPolicy{Tenant: ten, Actor: admin, Policy: []byte(bad)}); !errors.Is(err, domain.ErrValidation) {
				t.Errorf("policy %s: err = %v, want a validation error", bad, err)
			}
		}
		policy := `{"classes":{"short":{"archived_for":"1d"},"standard":{"archived_for":"30d","closed_for":"365d"}},
			"default_class":"standard","categories":{"billing":"short"}}`
		if _, _, err := a.Commands.SetRetentionPolicy(ctx, commands.SetRetentionPolicy{Tenant: ten, Actor: op, Policy: []byte(policy)}); !errors.Is(err, domain.ErrForbidden) {
			t.Fatalf("operator sets the policy: err = %v", err)
		}
		if _, _, err := a.Commands.SetRetentionPolicy(ctx, commands.SetRetentionPolicy{Tenant: ten, Actor: admin, Policy: []byte(policy)}); err != nil {
			t.Fatal(err)
		}

		intake := func(key, category string) domain.InquiryID {
			res, err := a.Commands.Intake(ctx, commands.Intake{Tenant: ten, Source: domain.SourcePublicForm, IdempotencyKey: key,
				Requester: domain.Requester{Name: "Ada", Email: key + "@example.com"}, Subject: "s", Message: "m", Category: category})
			if err != nil {
				t.Fatal(err)
			}
			return res.InquiryID
		}
		target := func(id domain.InquiryID, who domain.Principal) commands.Target {
			return commands.Target{Tenant: ten, InquiryID: id, Actor: who}
		}
		archive := func(id domain.InquiryID) {
			if _, err := a.Commands.Archive(ctx, commands.Archive{Target: target(id, op), Reason: "done"}); err != nil {
				t.Fatal(err)
			}
		}
		due := intake("due", "billing")       // short: archived 1 day
		held := intake("held", "billing")     // short, but held
		later := intake("later", "general")   // standard: archived 30 days
		closed := intake("closed", "general") // standard: closed 365 days, never archived
		for _, id := range []domain.InquiryID{due, held, later} {
			archive(id)
		}
		apptest.Transition(t, a, op, closed, domain.StatusTriaged, domain.PriorityNormal)
		apptest.Transition(t, a, op, closed, domain.StatusInProgress, "")
		apptest.Transition(t, a, op, closed, domain.StatusResolved, "")
		if _, err := a.Commands.Hold(ctx, commands.Hold{Target: target(held, admin), Reason: "litigation"}); err != nil {
			t.Fatal(err)
		}
		q, err := a.Commands.Load(ctx, ten, due)
		if err != nil {
			t.Fatal(err)
		}
		if want := clock.Now().Add(24 * time.Hour); !q.RetainUntil.Equal(want) || q.RetentionClass != "short" {
			t.Fatalf("archive recorded retain_until %v class %q, want %v short", q.RetainUntil, q.RetentionClass, want)
		}

		sweep := func() app.RetentionReport {
			t.Helper()
			apptest.CatchUp(t, a)
			rep, err := a.RetentionSweep(ctx, app.RetentionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Failed) > 0 || rep.NotLeader {
				t.Fatalf("sweep = %+v", rep)
			}
			return rep
		}
		if rep := sweep(); len(rep.Erased)+len(rep.Held) > 0 {
			t.Fatalf("nothing is due yet, sweep = %+v", rep)
		}

		// A dry run previews the sweep two days ahead and erases nothing.
		before := apptest.LogLen(t, a)
		preview, err := a.RetentionSweep(ctx, app.RetentionOptions{DryRun: true, At: clock.Now().Add(48 * time.Hour)})
		if err != nil || !slices.Equal(ids(preview.Due), []domain.InquiryID{due}) || !slices.Equal(ids(preview.Held), []domain.InquiryID{held}) || len(preview.Erased) > 0 {
			t.Fatalf("dry run = %+v %v", preview, err)
		}
		if _, err := a.RetentionSweep(ctx, app.RetentionOptions{At: clock.Now()}); !errors.Is(err, domain.ErrValidation) {
			t.Fatalf("a sweep at another time than now: err = %v", err)
		}
		if n := apptest.LogLen(t, a); n != before {
			t.Fatalf("the dry run appended %d events", n-before)
		}

		clock.Advance(48 * time.Hour)
		rep := sweep()
		if !slices.Equal(ids(rep.Erased), []domain.InquiryID{due}) || !slices.Equal(ids(rep.Held), []domain.InquiryID{held}) {
			t.Fatalf("sweep after 2 days = %+v, want erased [%s] held [%s]", rep, due, held)
		}
		assertRetentionErased(t, a, ten, due, "retention:short")
		for _, id := range []domain.InquiryID{held, later, closed} {
			q, err := a.Commands.Load(ctx, ten, id)
			if err != nil || q.Erased {
				t.Fatalf("%s erased=%v err=%v, want untouched", id, q.Erased, err)
			}
		}
		before = apptest.LogLen(t, a)
		if rep := sweep(); len(rep.Erased) > 0 || !slices.Equal(ids(rep.Held), []domain.InquiryID{held}) {
			t.Fatalf("second sweep = %+v", rep)
		}
		if n := apptest.LogLen(t, a); n != before {
			t.Fatalf("second sweep appended %d events", n-before)
		}

		// A policy change applies to inquiries archived and closed before it.
		shorter := `{"classes":{"short":{"archived_for":"1d"},"standard":{"archived_for":"1d","closed_for":"1d"}},
			"default_class":"standard","categories":{"billing":"short"}}`
		if _, _, err := a.Commands.SetRetentionPolicy(ctx, commands.SetRetentionPolicy{Tenant: ten, Actor: admin, Policy: []byte(shorter)}); err != nil {
			t.Fatal(err)
		}
		if rep := sweep(); !slices.Equal(ids(rep.Erased), sorted(later, closed)) {
			t.Fatalf("sweep after the policy change = %+v, want erased %s and %s", rep, later, closed)
		}
		assertRetentionErased(t, a, ten, later, "retention:standard")
		assertRetentionErased(t, a, ten, closed, "retention:standard")

		if _, err := a.Commands.Hold(ctx, commands.Hold{Target: target(held, admin), Release: true}); err != nil {
			t.Fatal(err)
		}
		if rep := sweep(); !slices.Equal(ids(rep.Erased), []domain.InquiryID{held}) || len(rep.Held) > 0 {
			t.Fatalf("sweep after the hold's release = %+v", rep)
		}
		if got := auditOutcomes(t, a, ten, "retention_erase"); got != "accepted:,accepted:,accepted:,accepted:" {
			t.Fatalf("retention_erase audit = %s", got)
		}
	})
}

func sorted(xs ...domain.InquiryID) []domain.InquiryID { slices.Sort(xs); return xs }

// assertRetentionErased checks the tombstone (actor system:retention, the policy named) and that
// the data key is destroyed.
func assertRetentionErased(t *testing.T, a *app.App, ten domain.TenantID, id domain.InquiryID, policy string) {
	t.Helper()
	recs, err := a.Store.ReadStream(t.Context(), eventstore.InquiryStream(ten, id), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Type != "InquiryErased" || !jsonHas(last.Metadata, `"actor":"system:retention"`) || !jsonHas(last.Data, `"policy":"`+policy+`"`) {
		t.Fatalf("%s last event %s %s %s", id, last.Type, last.Metadata, last.Data)
	}
	if _, err := a.Keys.Get(t.Context(), ten, id); !errors.Is(err, sealed.ErrErased) {
		t.Fatalf("%s key: err = %v, want destroyed", id, err)
	}
}

func jsonHas(b []byte, s string) bool { return strings.Contains(string(b), s) }

// noShred is a Shredder that destroys nothing: an erasure through it is one that crashed between
// its tombstone and the key's destruction.
type noShred struct{}

func (noShred) Destroy(context.Context, domain.TenantID, domain.InquiryID) error { return nil }

// TestRetentionSweepCompletesInterruptedErasure: an erasure whose tombstone is recorded but whose
// data key survived (a crash between the two steps) has its key destroyed by the next sweep, on
// each backend; and a sweep while another replica holds the sweep's lease does nothing
// (not_leader).
func TestRetentionSweepCompletesInterruptedErasure(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		clock := apptest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
		cfg.Now, cfg.DueTick, cfg.RetentionTick, cfg.Logger = clock.Now, -1, -1, slog.New(slog.DiscardHandler)
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		ten, admin, _ := apptest.TenantWithOperator(t, a, "acme")
		id := apptest.Intake(t, a, ten, "k1")
		crashing := *a.Commands
		crashing.Keys = noShred{}
		if _, err := crashing.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: ten, InquiryID: id, Actor: admin}}); err != nil {
			t.Fatal(err)
		}
		if dk, err := a.Keys.Get(ctx, ten, id); dk == nil || err != nil {
			t.Fatalf("the key should have survived the interrupted erasure: %v %v", dk, err)
		}
		apptest.CatchUp(t, a)

		other := projections.NewLease(a.DB, "job:retention", "another-replica", time.Hour, clock.Now)
		if ok, err := other.Acquire(ctx); !ok || err != nil {
			t.Fatalf("acquire = %v %v", ok, err)
		}
		if rep, err := a.RetentionSweep(ctx, app.RetentionOptions{}); err != nil || !rep.NotLeader || rep.KeysDestroyed != 0 {
			t.Fatalf("sweep beside another leader = %+v %v", rep, err)
		}
		other.Release(ctx)

		rep, err := a.RetentionSweep(ctx, app.RetentionOptions{})
		if err != nil || rep.KeysDestroyed != 1 {
			t.Fatalf("sweep = %+v %v", rep, err)
		}
		if _, err := a.Keys.Get(ctx, ten, id); !errors.Is(err, sealed.ErrErased) {
			t.Fatalf("key after the sweep: %v", err)
		}
		if rep, err := a.RetentionSweep(ctx, app.RetentionOptions{}); err != nil || rep.KeysDestroyed != 0 {
			t.Fatalf("second sweep = %+v %v", rep, err)
		}
	})
}

// TestRetentionSweepCompletesInterruptedAttachmentShredding: an erasure that crashed after its
// tombstone, before its inquiry's attachment rows were deleted (with the data key destroyed, or
// not yet), leaves no attachment row behind once the sweep has run, on each backend.
func TestRetentionSweepCompletesInterruptedAttachmentShredding(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		clock := apptest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
		cfg.Now, cfg.DueTick, cfg.RetentionTick, cfg.Logger = clock.Now, -1, -1, slog.New(slog.DiscardHandler)
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		ten, admin, _ := apptest.TenantWithOperator(t, a, "acme")
		for i, crash := range []commands.Shredder{commands.Shredders{a.Keys}, noShred{}} {
			id := apptest.Intake(t, a, ten, "k"+string(rune('a'+i)))
			if _, err := a.Attachments.Add(ctx, ten, id, admin.ID, []commands.NewFile{{Name: "passport-scan.txt", ContentType: "text/plain; charset=utf-8",
				Data: []byte("passport number X1234567")}}, commands.AttachmentLimits{}); err != nil {
				t.Fatal(err)
			}
			crashing := *a.Commands
			crashing.Keys = crash
			if _, err := crashing.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: ten, InquiryID: id, Actor: admin}}); err != nil {
				t.Fatal(err)
			}
			apptest.CatchUp(t, a)
			if _, err := a.RetentionSweep(ctx, app.RetentionOptions{}); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := a.DB.QueryRowContext(ctx, a.DB.Rebind(`SELECT count(*) FROM inquiry_attachments WHERE tenant_id = ? AND inquiry_id = ?`),
				ten, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("case %d: %d attachment rows of the erased inquiry left after the sweep", i, n)
			}
			if _, err := a.Keys.Get(ctx, ten, id); !errors.Is(err, sealed.ErrErased) {
				t.Fatalf("case %d: key after the sweep: %v", i, err)
			}
		}
	})
}
