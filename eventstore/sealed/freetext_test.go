package sealed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// freeTextEvents are the events whose free-text reason a person types, each with its own secret.
var freeTextEvents = []struct {
	name   string
	secret string
	event  domain.Event
}{
	{"waiting", "Reason-Waiting-Amber-1101", domain.InquiryStatusChanged{From: domain.StatusInProgress, To: domain.StatusWaiting, Reason: "Reason-Waiting-Amber-1101"}},
	{"cancel", "Reason-Cancel-Beryl-2202", domain.InquiryStatusChanged{From: domain.StatusWaiting, To: domain.StatusCancelled, Reason: "Reason-Cancel-Beryl-2202"}},
	{"archive", "Reason-Archive-Coral-3303", domain.InquiryArchived{Reason: "Reason-Archive-Coral-3303", RetainUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Class: "standard"}},
	{"unarchive", "Reason-Unarchive-Dune-4404", domain.InquiryUnarchived{Reason: "Reason-Unarchive-Dune-4404"}},
	{"hold", "Reason-Hold-Ember-5505", domain.LegalHoldPlaced{Reason: "Reason-Hold-Ember-5505"}},
	{"release", "Reason-Release-Fern-6606", domain.LegalHoldReleased{Reason: "Reason-Release-Fern-6606"}},
}

// reasonOf decodes the reason member of an event as read.
func reasonOf(t *testing.T, r eventstore.RecordedEvent) string {
	t.Helper()
	var m struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("%s: %v", r.Data, err)
	}
	return m.Reason
}

// TestFreeTextSealed, per free-text field (the reason of a waiting or cancel transition, an
// archive, an unarchive, a legal hold placed and released): appended through the sealed store it
// reaches the backend sealed (not in clear), reads back opened, and reads "[erased]" once the key
// is destroyed, while the members a machine writes (from, to, retention class) stay. SQLite and
// Postgres.
func TestFreeTextSealed(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		inner := innerStore(t, db)
		keys := newKeys(t, db)
		store := sealed.New(inner, keys)
		tenant, id := domain.TenantID("t1"), domain.InquiryID("q1")
		stream := eventstore.InquiryStream(tenant, id)
		for i, f := range freeTextEvents {
			exp := eventstore.Exact(uint64(i - 1))
			if i == 0 {
				exp = eventstore.NoStream()
			}
			if _, err := store.Append(ctx, stream, exp, []eventstore.EventData{event(t, tenant, f.name, f.event)}); err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
		}
		raw, err := inner.ReadStream(ctx, stream, 0, 0)
		if err != nil || len(raw) != len(freeTextEvents) {
			t.Fatalf("raw = %d %v", len(raw), err)
		}
		for i, r := range raw {
			if bytes.Contains(r.Data, []byte(freeTextEvents[i].secret)) || !bytes.Contains(r.Data, []byte(`"sealed"`)) {
				t.Errorf("%s: the backend holds %s", freeTextEvents[i].name, r.Data)
			}
		}
		opened, err := store.ReadStream(ctx, stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range opened {
			if got := reasonOf(t, r); got != freeTextEvents[i].secret {
				t.Errorf("%s: reads reason %q, want %q", freeTextEvents[i].name, got, freeTextEvents[i].secret)
			}
		}
		if err := keys.Destroy(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		erased, err := store.ReadStream(ctx, stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range erased {
			if got := reasonOf(t, r); got != domain.Erased {
				t.Errorf("%s: after erasure reads reason %q", freeTextEvents[i].name, got)
			}
		}
		if !bytes.Contains(erased[0].Data, []byte(`"to":"waiting"`)) || !bytes.Contains(erased[2].Data, []byte(`"retention_class":"standard"`)) {
			t.Errorf("machine-written members lost: %s, %s", erased[0].Data, erased[2].Data)
		}
	})
}

// TestFreeTextWrittenInClearBeforeSealing: events written before their reason was sealed (straight
// to the backend, reason in clear) read as written while the inquiry's key lives, through every
// reader that opens; once the key is destroyed they read "[erased]" (also on a backend that
// cannot rewrite them), and RedactErased, the erasure's pass over its stream, rewrites them so
// the backend no longer holds the text; a second pass changes nothing. An inquiry whose key lives
// is left alone by it. SQLite and Postgres.
func TestFreeTextWrittenInClearBeforeSealing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		inner := innerStore(t, db)
		keys := newKeys(t, db)
		store := sealed.New(inner, keys)
		tenant, id := domain.TenantID("t1"), domain.InquiryID("q1")
		stream := eventstore.InquiryStream(tenant, id)
		// The inquiry has its key (its first event was sealed); the reasons were written in clear.
		if _, err := store.Append(ctx, stream, eventstore.NoStream(), []eventstore.EventData{event(t, tenant, "c0", domain.NoteAdded{Body: "a note"})}); err != nil {
			t.Fatal(err)
		}
		for i, f := range freeTextEvents {
			if _, err := inner.Append(ctx, stream, eventstore.Exact(uint64(i)), []eventstore.EventData{event(t, tenant, f.name, f.event)}); err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
		}
		redact := store.(interface {
			RedactErased(context.Context, domain.TenantID, domain.InquiryID) error
		})
		if err := redact.RedactErased(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		check := func(when string, want func(i int) string) {
			t.Helper()
			recs, err := store.ReadStream(ctx, stream, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			all, err := store.ReadAll(ctx, eventstore.Start, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(freeTextEvents) || len(all) != len(freeTextEvents)+1 {
				t.Fatalf("%s: read %d and %d events", when, len(recs), len(all))
			}
			for i := range recs {
				if got := reasonOf(t, recs[i]); got != want(i) {
					t.Errorf("%s: %s reads %q, want %q", when, freeTextEvents[i].name, got, want(i))
				}
				if got := reasonOf(t, all[i+1]); got != want(i) {
					t.Errorf("%s: %s reads %q from the log, want %q", when, freeTextEvents[i].name, got, want(i))
				}
			}
		}
		check("before erasure", func(i int) string { return freeTextEvents[i].secret })
		raw, _ := inner.ReadStream(ctx, stream, 1, 0)
		if !bytes.Contains(raw[0].Data, []byte(freeTextEvents[0].secret)) {
			t.Fatalf("RedactErased rewrote an event of an inquiry whose key lives: %s", raw[0].Data)
		}

		if err := keys.Destroy(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		check("after the key's destruction", func(int) string { return domain.Erased })
		if err := redact.RedactErased(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		if err := redact.RedactErased(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		check("after the redaction pass", func(int) string { return domain.Erased })
		raw, err := inner.ReadStream(ctx, stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range raw {
			for _, f := range freeTextEvents {
				if bytes.Contains(r.Data, []byte(f.secret)) {
					t.Errorf("the backend still holds %q: %s", f.secret, r.Data)
				}
			}
		}
	})
}
