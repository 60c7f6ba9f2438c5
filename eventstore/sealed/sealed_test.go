package sealed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

func master(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// newKeys opens db's key table under master(1), as a process would.
func newKeys(t *testing.T, db *sqldb.DB) *sealed.Keys {
	t.Helper()
	keys, err := sealed.NewKeys(t.Context(), db, nil, master(1))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func innerStore(t *testing.T, db *sqldb.DB) eventstore.Store {
	t.Helper()
	var s eventstore.Store
	var err error
	if db.Dialect == sqldb.Postgres {
		// Events in a schema of their own: the store and the key table share no table.
		s, err = postgres.Open(t.Context(), pgtest.URL(t), postgres.Options{})
	} else {
		s, err = sqlite.New(t.Context(), db, sqlite.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func event(t *testing.T, tenant domain.TenantID, cmd string, e domain.Event) eventstore.EventData {
	t.Helper()
	typ, data, err := domain.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(domain.Metadata{TenantID: tenant, Actor: "p1", CommandID: cmd, SchemaVersion: domain.SchemaVersion})
	return eventstore.EventData{ID: eventstore.DeterministicID(cmd, 0), Type: typ, Data: data, Metadata: meta}
}

// TestSealedEventsShredOnDestroy: personal members reach the backend only sealed; every read path
// opens them; once the key is destroyed they read as "[erased]", the other members stay, no new
// key is created and no personal member can be appended again. SQLite and Postgres.
func TestSealedEventsShredOnDestroy(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		inner := innerStore(t, db)
		keys := newKeys(t, db)
		store := sealed.New(inner, keys)
		tenant, id := domain.TenantID("t1"), domain.InquiryID("q1")
		stream := eventstore.InquiryStream(tenant, id)
		const secret = "Zebulon-7731"
		if _, err := store.Append(ctx, stream, eventstore.NoStream(), []eventstore.EventData{event(t, tenant, "c1", domain.InquiryReceived{
			InquiryID: id, TenantID: tenant, Source: domain.SourceAPI, Receipt: "CB-1", Priority: domain.PriorityNormal, Category: "billing",
			Requester: domain.Requester{Name: secret, Email: secret + "@example.com"}, Subject: secret, Message: secret,
		})}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, stream, eventstore.Exact(0), []eventstore.EventData{event(t, tenant, "c2", domain.NoteAdded{Body: "note " + secret})}); err != nil {
			t.Fatal(err)
		}
		raw, err := inner.ReadStream(ctx, stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range raw {
			if bytes.Contains(r.Data, []byte(secret)) {
				t.Fatalf("backend holds %s in clear: %s", r.Type, r.Data)
			}
		}
		read := func() []domain.Event {
			recs, err := store.ReadStream(ctx, stream, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			all, err := store.ReadAll(ctx, eventstore.Start, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(recs) || !bytes.Equal(all[1].Data, recs[1].Data) {
				t.Fatalf("ReadAll and ReadStream disagree")
			}
			var out []domain.Event
			for _, r := range recs {
				e, err := domain.Decode(r.Type, 0, r.Data)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, e)
			}
			return out
		}
		evs := read()
		if got := evs[0].(domain.InquiryReceived); got.Subject != secret || got.Requester.Email != secret+"@example.com" || got.Category != "billing" {
			t.Fatalf("opened = %+v", got)
		}
		if got := evs[1].(domain.NoteAdded); got.Body != "note "+secret {
			t.Fatalf("note = %+v", got)
		}
		if err := keys.Destroy(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		evs = read()
		got := evs[0].(domain.InquiryReceived)
		if got.Subject != domain.Erased || got.Message != domain.Erased || got.Requester.Name != domain.Erased || got.Requester.Email != domain.Erased {
			t.Fatalf("after destroy = %+v", got)
		}
		if got.Receipt != "CB-1" || got.Category != "billing" || got.Priority != domain.PriorityNormal {
			t.Fatalf("non-personal members lost: %+v", got)
		}
		if n := evs[1].(domain.NoteAdded); n.Body != domain.Erased {
			t.Fatalf("note after destroy = %q", n.Body)
		}
		if _, err := keys.Ensure(ctx, tenant, id); !errors.Is(err, sealed.ErrErased) {
			t.Fatalf("Ensure after destroy = %v, want ErrErased", err)
		}
		if _, err := store.Append(ctx, stream, eventstore.Exact(1), []eventstore.EventData{event(t, tenant, "c3", domain.NoteAdded{Body: "late"})}); !errors.Is(err, sealed.ErrErased) {
			t.Fatalf("append of a personal member after destroy = %v, want ErrErased", err)
		}
		if err := keys.Destroy(ctx, tenant, id); err != nil {
			t.Fatalf("second destroy: %v", err)
		}
		// Subscribers see the same.
		sub, cancel := context.WithCancel(ctx)
		defer cancel()
		var seen []eventstore.RecordedEvent
		_ = store.Subscribe(sub, eventstore.Start, func(_ context.Context, recs []eventstore.RecordedEvent) error {
			seen = append(seen, recs...)
			cancel()
			return nil
		})
		if len(seen) < 2 || strings.Contains(string(seen[1].Data), secret) || !strings.Contains(string(seen[1].Data), domain.Erased) {
			t.Fatalf("subscribed = %v", seen)
		}
	})
}

// TestRewrapRotatesMasterKey: after a rotation the old master is needed only until Rewrap ran.
func TestRewrapRotatesMasterKey(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		now := func() time.Time { return time.Unix(1_700_000_000, 0) }
		old, err := sealed.NewKeys(ctx, db, now, master(1))
		if err != nil {
			t.Fatal(err)
		}
		dk, err := old.Ensure(ctx, "t1", "q1")
		if err != nil {
			t.Fatal(err)
		}
		ct := dk.Seal([]byte("hello"), []byte("aad"))
		rotated, err := sealed.NewKeys(ctx, db, now, master(2), master(1))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := rotated.Rewrap(ctx); err != nil || n != 1 {
			t.Fatalf("Rewrap = %d, %v", n, err)
		}
		onlyNew, err := sealed.NewKeys(ctx, db, now, master(2))
		if err != nil {
			t.Fatal(err)
		}
		dk2, err := onlyNew.Get(ctx, "t1", "q1")
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := dk2.Open(ct, []byte("aad")); err != nil || string(plain) != "hello" {
			t.Fatalf("open after rewrap = %q %v", plain, err)
		}
		if _, err := sealed.NewKeys(ctx, db, now, []byte("short")); err == nil {
			t.Fatal("a short master key was accepted")
		}
	})
}

// TestEnsureNewFindsStoredKey: the insert-first path of a new stream returns the key already
// stored (a retried intake on a process with a cold cache) rather than a second one, and never
// creates a key for an erased inquiry. SQLite and Postgres.
func TestEnsureNewFindsStoredKey(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		first := newKeys(t, db)
		tenant, id := domain.TenantID("t1"), domain.InquiryID("q-new")
		dk, err := first.EnsureNew(ctx, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		box := dk.Seal([]byte("sealed once"), []byte("aad"))
		cold := newKeys(t, db) // another process: empty cache
		again, err := cold.EnsureNew(ctx, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := again.Open(box, []byte("aad")); err != nil || string(got) != "sealed once" {
			t.Fatalf("the second EnsureNew returned another key: %q, %v", got, err)
		}
		if err := first.Destroy(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		fresh := newKeys(t, db)
		if _, err := fresh.EnsureNew(ctx, tenant, id); !errors.Is(err, sealed.ErrErased) {
			t.Fatalf("EnsureNew after destroy = %v, want ErrErased", err)
		}
	})
}

// TestOpeningOnlyOpensTheEventsNamed: through OpeningOnly, the events the function names read
// opened and every other one reads exactly as through AsStored; the function is handed each event
// as stored. SQLite and Postgres.
func TestOpeningOnlyOpensTheEventsNamed(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		keys := newKeys(t, db)
		store := sealed.New(innerStore(t, db), keys)
		tenant := domain.TenantID("t1")
		for _, id := range []domain.InquiryID{"q1", "q2"} {
			stream := eventstore.InquiryStream(tenant, id)
			if _, err := store.Append(ctx, stream, eventstore.NoStream(), []eventstore.EventData{event(t, tenant, "c-"+string(id), domain.InquiryReceived{
				InquiryID: id, TenantID: tenant, Receipt: "CB-" + string(id), Subject: "secret-" + string(id),
			})}); err != nil {
				t.Fatal(err)
			}
		}
		want := eventstore.InquiryStream(tenant, "q2")
		var handed []string
		view := store.(eventstore.SealedViews).OpeningOnly(func(e eventstore.RecordedEvent) bool {
			handed = append(handed, string(e.Data))
			return e.StreamID == want
		})
		got, err := view.ReadAll(ctx, eventstore.Start, 0)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := store.(eventstore.SealedViews).AsStored().ReadAll(ctx, eventstore.Start, 0)
		if err != nil {
			t.Fatal(err)
		}
		opened, err := store.ReadAll(ctx, eventstore.Start, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(stored) != 2 || len(opened) != 2 {
			t.Fatalf("read %d, %d and %d events, want 2", len(got), len(stored), len(opened))
		}
		if !bytes.Equal(got[0].Data, stored[0].Data) || !bytes.Equal(got[1].Data, opened[1].Data) || !strings.Contains(string(got[1].Data), "secret-q2") {
			t.Fatalf("through OpeningOnly: %s and %s", got[0].Data, got[1].Data)
		}
		for _, h := range handed {
			if strings.Contains(h, "secret-") {
				t.Fatalf("the function was handed an opened event: %s", h)
			}
		}
	})
}
