package commands_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// onPostgres opens a Postgres event store on a fresh schema, with tenant acme and a handler on it
// whose clock is now.
func onPostgres(t *testing.T, now func() time.Time) (*sqldb.DB, *postgres.Store, *commands.Handler, domain.TenantID) {
	t.Helper()
	ctx := t.Context()
	db, err := sqldb.OpenPostgres(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := postgres.New(ctx, db.PgxPool(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ten, err := tenancy.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	tn, _, _, err := ten.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	h := &commands.Handler{Store: store, Principals: ten, Secret: []byte("test-secret"),
		Now: now, NewID: func() string { return fmt.Sprintf("id-%d", seq.Add(1)) }}
	return db, store, h, tn.ID
}

// TestAcceptedEntryInItsAppendOnPostgres: on Postgres, with the event store on the audit log's pool,
// an accepted command's entry is written by its append's own statement (no grouped write of its
// own; the entry and the event share one transaction); a replay's entry is written afterwards; and when the entry cannot be written the append
// fails with it, so nothing is accepted unaudited.
func TestAcceptedEntryInItsAppendOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _, h, tn := onPostgres(t, func() time.Time { return auditTime })
	l, err := commands.NewAuditLog(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	a := &commands.Audited{Next: h, Sink: l, Now: func() time.Time { return auditTime }}

	c := intake("with-append")
	c.Tenant = tn
	before := db.GroupStats().Calls
	res, err := a.Intake(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if calls := db.GroupStats().Calls - before; calls != 0 {
		t.Fatalf("an accepted intake made %d grouped writes, want 0 (its append holds the entry)", calls)
	}
	// One transaction wrote both: xmin is its 32-bit id, events.xid the full one.
	var entryTx, eventTx int64
	if err := db.QueryRowContext(ctx, `SELECT xmin::text::bigint FROM command_audit WHERE inquiry_id = $1 AND outcome = 'accepted'`,
		res.InquiryID).Scan(&entryTx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT xid::text::bigint % 4294967296 FROM events WHERE stream = $1`,
		eventstore.InquiryStream(tn, res.InquiryID)).Scan(&eventTx); err != nil {
		t.Fatal(err)
	}
	if entryTx != eventTx {
		t.Errorf("the accepted entry committed in transaction %d, its event in %d: want one transaction", entryTx, eventTx)
	}
	if _, err := a.Intake(ctx, c); err != nil { // replayed: nothing appended, entry written after
		t.Fatal(err)
	}
	got, err := l.Entries(ctx, tn, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Outcome != commands.OutcomeAccepted || got[0].InquiryID != res.InquiryID ||
		got[0].Command != "intake" || got[0].Actor != domain.System(tn, string(c.Source)).ID ||
		got[1].Outcome != commands.OutcomeReplayed || got[1].InquiryID != res.InquiryID {
		t.Fatalf("entries %+v, want accepted then replayed for %s", got, res.InquiryID)
	}

	if _, err := db.ExecContext(ctx, `DROP TABLE command_audit`); err != nil {
		t.Fatal(err)
	}
	c = intake("unauditable")
	c.Tenant = tn
	if _, err := a.Intake(ctx, c); err == nil {
		t.Fatal("an intake whose audit entry cannot be written was accepted")
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d events (%v), want only the first intake's", n, err)
	}
}
