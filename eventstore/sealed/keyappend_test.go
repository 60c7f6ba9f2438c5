package sealed_test

import (
	"errors"
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestFirstAppendStoresItsKey: an inquiry's first append stores its new data key as a companion row
// of the append (no separate key write), beside the companions its ctx already carries, and the key
// commits with the events or not at all: a failing companion of the same append leaves neither. A
// key stored before (another process's first attempt) is used instead of the fresh one, a
// tombstone still refuses, and a refused append leaves the stored key as it was. SQLite and
// Postgres.
func TestFirstAppendStoresItsKey(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		inner := innerStore(t, db)
		if db.Dialect == sqldb.Postgres {
			// On the handle's own pool, as the app wires it: companions are written there.
			pg, err := postgres.New(ctx, db.PgxPool(), postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pg.Close() })
			inner = pg
		}
		newStore := func() (eventstore.Store, *sealed.Keys) {
			keys := newKeys(t, db)
			return sealed.New(inner, keys), keys
		}
		store, keys := newStore()
		tenant := domain.TenantID("t1")
		const secret = "Quillon-4410"
		intake := func(s eventstore.Store, id domain.InquiryID, opts ...eventstore.AppendOption) error {
			_, err := s.Append(ctx, eventstore.InquiryStream(tenant, id), eventstore.NoStream(), []eventstore.EventData{event(t, tenant, "c-"+string(id), domain.InquiryReceived{
				InquiryID: id, TenantID: tenant, Source: domain.SourceAPI, Receipt: "CB-" + string(id), Priority: domain.PriorityNormal,
				Category: "billing", Requester: domain.Requester{Name: secret, Email: "q@example.com"}, Subject: secret, Message: secret,
			})}, opts...)
			return err
		}
		// opened reads id's stream through a store with an empty key cache.
		opened := func(id domain.InquiryID) string {
			t.Helper()
			s, _ := newStore()
			recs, err := s.ReadStream(ctx, eventstore.InquiryStream(tenant, id), 0, 0)
			if err != nil || len(recs) != 1 {
				t.Fatalf("read %s: %d events, %v", id, len(recs), err)
			}
			e, err := domain.Decode(recs[0].Type, 0, recs[0].Data)
			if err != nil {
				t.Fatal(err)
			}
			return e.(domain.InquiryReceived).Subject
		}
		wrapped := func(id domain.InquiryID) (n int, w []byte) {
			t.Helper()
			rows, err := db.QueryContext(ctx, db.Rebind(`SELECT wrapped FROM inquiry_keys WHERE tenant_id = ? AND inquiry_id = ?`), string(tenant), string(id))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				n++
				if err := rows.Scan(&w); err != nil {
					t.Fatal(err)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return n, w
		}

		// A first append writes the key with its events: on SQLite one Group call (two before),
		// on Postgres none besides the append's own statement (one before).
		var companionWritten bool
		if _, err := db.ExecContext(ctx, `CREATE TABLE companion_probe (stream TEXT)`); err != nil {
			t.Fatal(err)
		}
		withProbe := eventstore.WithCompanions(&eventstore.Companion{Handle: db.CompanionHandle(), Table: "companion_probe",
			Columns: []string{"stream"}, Values: func(s string) []any { return []any{s} }, Written: func() { companionWritten = true }})
		before := db.GroupStats().Calls
		if err := intake(store, "q1", withProbe); err != nil {
			t.Fatal(err)
		}
		want := uint64(1)
		if db.Dialect == sqldb.Postgres {
			want = 0
		}
		if calls := db.GroupStats().Calls - before; calls != want {
			t.Fatalf("Group calls for a first append = %d, want %d", calls, want)
		}
		if probes := dbtest.Strings(t, db, `SELECT stream FROM companion_probe`); !companionWritten || len(probes) != 1 {
			t.Fatalf("the companion the append already carried: written %v, rows %q", companionWritten, probes)
		}
		if n, _ := wrapped("q1"); n != 1 || opened("q1") != secret {
			t.Fatalf("q1: %d key rows, subject %q", n, opened("q1"))
		}

		// A failing companion of the same append: neither the key nor the events are stored.
		failing := eventstore.WithCompanions(&eventstore.Companion{Handle: db.CompanionHandle(), Table: "no_such_table",
			Columns: []string{"stream"}, Values: func(s string) []any { return []any{s} }})
		if err := intake(store, "q2", failing); err == nil {
			t.Fatal("an append whose companion fails succeeded")
		}
		if n, _ := wrapped("q2"); n != 0 {
			t.Fatalf("a failed append left %d key rows", n)
		}
		if recs, err := inner.ReadStream(ctx, eventstore.InquiryStream(tenant, "q2"), 0, 0); err != nil || len(recs) != 0 {
			t.Fatalf("a failed append left %d events, %v", len(recs), err)
		}

		// A key stored before, unknown to this store's cache: the stored key seals the events.
		_, other := newStore()
		if _, err := other.Ensure(ctx, tenant, "q3"); err != nil {
			t.Fatal(err)
		}
		_, w0 := wrapped("q3")
		if err := intake(store, "q3"); err != nil {
			t.Fatal(err)
		}
		if n, w := wrapped("q3"); n != 1 || string(w) != string(w0) || opened("q3") != secret {
			t.Fatalf("q3: %d key rows, changed %v, subject %q", n, string(w) != string(w0), opened("q3"))
		}

		// A refused append (the stream exists) with a store that has no cached key: nothing changes.
		_, w1 := wrapped("q1")
		again, _ := newStore()
		if err := intake(again, "q1"); !errors.Is(err, eventstore.ErrConcurrency) {
			t.Fatalf("second first append = %v, want ErrConcurrency", err)
		}
		if n, w := wrapped("q1"); n != 1 || string(w) != string(w1) || opened("q1") != secret {
			t.Fatalf("q1 after a refused append: %d key rows, changed %v", n, string(w) != string(w1))
		}

		// A tombstone: no key is created, nothing is appended.
		if err := keys.Destroy(ctx, tenant, "q4"); err != nil {
			t.Fatal(err)
		}
		fresh, _ := newStore()
		if err := intake(fresh, "q4"); !errors.Is(err, sealed.ErrErased) {
			t.Fatalf("append after a tombstone = %v, want ErrErased", err)
		}
		if recs, err := inner.ReadStream(ctx, eventstore.InquiryStream(tenant, "q4"), 0, 0); err != nil || len(recs) != 0 {
			t.Fatalf("after a tombstone: %d events, %v", len(recs), err)
		}
	})
}
