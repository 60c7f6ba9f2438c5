package commands_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sqlite"
)

// TestIntakeIDsGrowWithTime: an inquiry's id is a UUIDv7 of the moment it was made, so ids made
// later sort later (the indexes keyed by inquiry grow at their ends), keyed or not; a redelivery
// still gets the first inquiry's id.
func TestIntakeIDsGrowWithTime(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	clock := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	tb.h.Now = func() time.Time { return clock }
	var ids []string
	for i := range 6 {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprint("k", i)
		}
		r := tb.receive(t, key)
		id := string(r.InquiryID)
		if len(id) != 36 || id[14] != '7' || !slices.Contains([]byte("89ab"), id[19]) {
			t.Fatalf("id %s is not a UUIDv7", id)
		}
		if got := id[0:8] + id[9:13]; got != fmt.Sprintf("%012x", clock.UnixMilli()) {
			t.Fatalf("id %s does not begin with its time %012x", id, clock.UnixMilli())
		}
		ids = append(ids, id)
		clock = clock.Add(time.Millisecond)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("ids made in order do not sort in order: %v", ids)
	}
	all, err := tb.store.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil || len(all) != len(ids) {
		t.Fatalf("log has %d events (%v), want %d", len(all), err, len(ids))
	}
	for i, e := range all {
		if e.ID[:18] != ids[i][:18] || e.ID == ids[i] {
			t.Fatalf("event %s of inquiry %s: its id must lead with the inquiry's time and differ from it", e.ID, ids[i])
		}
	}
	if r := tb.receive(t, "k2"); string(r.InquiryID) != ids[2] || !r.Replayed {
		t.Fatalf("redelivery got %s (replayed %v), want %s", r.InquiryID, r.Replayed, ids[2])
	}
	id, receipt, err := tb.h.FindIntake(t.Context(), tb.tenant, domain.SourcePublicForm, "k4")
	if err != nil || string(id) != ids[4] || receipt == "" {
		t.Fatalf("FindIntake(k4) = %s %q %v, want %s", id, receipt, err, ids[4])
	}
	if _, _, err := tb.h.FindIntake(t.Context(), tb.tenant, domain.SourcePublicForm, "never"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("FindIntake of a key never used: %v, want not found", err)
	}
	if _, _, err := tb.h.FindIntake(t.Context(), tb.otherOrg.TenantID, domain.SourcePublicForm, "k4"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("FindIntake across tenants: %v, want not found", err)
	}
}

// noClaims is a store that keeps no claims, as the sealed store over KurrentDB: its Claim reports
// false.
type noClaims struct{ eventstore.Store }

func (noClaims) Claim(string) (eventstore.AppendOption, bool)    { return nil, false }
func (noClaims) Claimed(context.Context, string) (string, error) { return "", nil }

func (n noClaims) Capabilities() eventstore.Capabilities {
	c := n.Store.Capabilities()
	c.Claims = false
	return c
}

// TestIntakeWithoutClaimsUsesTheDerivedID: on a store without claims, a keyed intake's inquiry id
// is the one derived from its key, and a redelivery is caught by the stream's own condition.
func TestIntakeWithoutClaimsUsesTheDerivedID(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	h := *tb.h
	h.Store = noClaims{tb.store}
	c := intake("legacy")
	c.Tenant = tb.tenant
	first, err := h.Intake(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	derived, _ := h.IntakeID(tb.tenant, domain.SourcePublicForm, "legacy")
	if first.InquiryID != derived {
		t.Fatalf("id %s, want the derived %s", first.InquiryID, derived)
	}
	again, err := h.Intake(t.Context(), c)
	if err != nil || again.InquiryID != derived || !again.Replayed {
		t.Fatalf("redelivery: %+v %v", again, err)
	}
	if id, _, err := h.FindIntake(t.Context(), tb.tenant, domain.SourcePublicForm, "legacy"); err != nil || id != derived {
		t.Fatalf("FindIntake = %s %v", id, err)
	}
}

// TestInquiriesMadeBeforeClaimsAreFoundByTheirRedelivery: inquiries made before the store kept
// claims are named by their derived ids; the migration that creates the claims table claims each
// one's own name, so a redelivery after the upgrade replays instead of making a second inquiry.
func TestInquiriesMadeBeforeClaimsAreFoundByTheirRedelivery(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	old := *tb.h
	old.Store = noClaims{tb.store}
	c := intake("before-claims")
	c.Tenant = tb.tenant
	first, err := old.Intake(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// The store as it was: no claims table, its migration not applied.
	for _, q := range []string{`DROP TABLE stream_claims`, `DELETE FROM schema_migrations WHERE component = 'eventstore' AND version = 2`} {
		if _, err := tb.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	upgraded, err := sqlite.New(ctx, tb.db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := *tb.h
	h.Store = upgraded
	again, err := h.Intake(ctx, c)
	if err != nil || again.InquiryID != first.InquiryID || !again.Replayed || again.Receipt != first.Receipt {
		t.Fatalf("redelivery after the upgrade: %+v %v, want %s replayed", again, err, first.InquiryID)
	}
	other := c
	other.Message = "Something else"
	if _, err := h.Intake(ctx, other); !errors.Is(err, domain.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other payload after the upgrade: %v", err)
	}
	all, err := upgraded.ReadAll(ctx, eventstore.Start, 0)
	if err != nil || len(all) != 1 {
		t.Fatalf("log has %d events (%v), want 1", len(all), err)
	}
}

// TestIntakeConcurrentDuplicatesOnPostgres: one submission delivered many times at once through
// the Postgres store's grouped appends makes one inquiry, and every delivery gets its id.
func TestIntakeConcurrentDuplicatesOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, store, h, tenant := onPostgres(t, time.Now)
	deliverAtOnce(ctx, t, h, tenant, 16)
	all, err := store.ReadAll(ctx, eventstore.Start, 0)
	if err != nil || len(all) != 1 {
		t.Fatalf("log has %d events (%v), want 1", len(all), err)
	}
}

// deliverAtOnce delivers one submission n times at once, requires every delivery to get the same
// inquiry and the same receipt, and returns that inquiry.
func deliverAtOnce(ctx context.Context, t *testing.T, h *commands.Handler, tenant domain.TenantID, n int) domain.InquiryID {
	t.Helper()
	res := make([]commands.IntakeResult, n)
	var wg sync.WaitGroup
	for i := range res {
		wg.Go(func() {
			c := intake("dup")
			c.Tenant = tenant
			r, err := h.Intake(ctx, c)
			if err != nil {
				t.Errorf("delivery %d: %v", i, err)
			}
			res[i] = r
		})
	}
	wg.Wait()
	for _, r := range res {
		if r.InquiryID != res[0].InquiryID || r.Receipt != res[0].Receipt {
			t.Fatalf("deliveries got different inquiries or receipts: %+v", res)
		}
	}
	return res[0].InquiryID
}

// TestDerivedNamesDoNotChange: the id and receipt derived from an intake's key name the claims
// and streams of inquiries already stored; a change to the derivation would make their
// redeliveries second inquiries. The values were derived before inquiry ids grew with time.
func TestDerivedNamesDoNotChange(t *testing.T) {
	t.Parallel()
	h := &commands.Handler{Secret: []byte("test-secret")}
	id, receipt := h.IntakeID("7a0e3f52-7d0c-4c1e-9a57-2f5b0c8f3d11", domain.SourcePublicForm, "key-1")
	if id != "1eeecf29-37ba-878c-9be9-4c679c5d0ea2" || receipt != "CB-4DI7LBX5Z2KS3DCJ" {
		t.Fatalf("IntakeID = %s, %s; the derivation changed", id, receipt)
	}
}
