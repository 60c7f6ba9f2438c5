package app_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/kurrent"
	"github.com/casebook/casebook/eventstore/kurrent/kurrenttest"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestSealLegacyThenErase: events written before sealing (straight to the backend, personal fields
// in clear) are sealed in place by the migration, which a second run finds nothing left to do;
// the inquiry still reads in full; once it is erased no byte of its personal fields is left: on
// SQLite in no file of the data directory after close, on Postgres in no column of any table.
func TestSealLegacyThenErase(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		cfg.Logger, cfg.DueTick, cfg.RetentionTick = slog.New(slog.DiscardHandler), -1, -1
		a, err := app.Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		closed := false
		t.Cleanup(func() {
			if !closed {
				_ = a.Close()
			}
		})
		ctx := t.Context()
		ten, admin, op := apptest.TenantWithOperator(t, a, "acme")
		var raw eventstore.Store
		if a.DB.Dialect == sqldb.Postgres {
			raw, err = postgres.New(ctx, a.DB.PgxPool(), postgres.Options{})
		} else {
			raw, err = sqlite.New(ctx, a.DB, sqlite.Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		legacy := *a.Commands
		legacy.Store, legacy.Keys = raw, nil
		secrets := []string{"Legacy Lumberjack", "legacy.l3318@example.org", "Subject-Sepia-5102", "Message-Umber-7735", "Note-Ochre-2264"}
		res, err := legacy.Intake(ctx, commands.Intake{Tenant: ten, Source: domain.SourcePublicForm, IdempotencyKey: "old",
			Requester: domain.Requester{Name: secrets[0], Email: secrets[1]}, Subject: secrets[2], Message: secrets[3], Category: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := legacy.AddNote(ctx, commands.AddNote{Target: commands.Target{Tenant: ten, InquiryID: res.InquiryID, Actor: op}, Body: secrets[4]}); err != nil {
			t.Fatal(err)
		}
		recs, err := raw.ReadStream(ctx, eventstore.InquiryStream(ten, res.InquiryID), 0, 0)
		if err != nil || len(recs) != 2 || !bytes.Contains(recs[0].Data, []byte(secrets[3])) {
			t.Fatalf("the legacy events are not in clear: %v %v", recs, err)
		}

		rep, err := a.SealLegacy(ctx, "")
		if err != nil || rep.Sealed != 2 || rep.Changed != 0 {
			t.Fatalf("seal-legacy = %+v %v", rep, err)
		}
		if again, err := a.SealLegacy(ctx, ""); err != nil || again.Sealed != 0 || again.Redacted != 0 {
			t.Fatalf("second run = %+v %v", again, err)
		}
		if resumed, err := a.SealLegacy(ctx, rep.Reached); err != nil || resumed.Scanned != 0 {
			t.Fatalf("resumed at %s = %+v %v", rep.Reached, resumed, err)
		}
		recs, _ = raw.ReadStream(ctx, eventstore.InquiryStream(ten, res.InquiryID), 0, 0)
		for _, r := range recs {
			for _, s := range secrets {
				if bytes.Contains(r.Data, []byte(s)) {
					t.Fatalf("revision %d still holds %q in clear", r.Revision, s)
				}
			}
		}
		q, err := a.Commands.Load(ctx, ten, res.InquiryID)
		if err != nil || q.Message != secrets[3] || q.Requester.Email != secrets[1] {
			t.Fatalf("after sealing = %+v %v", q, err)
		}

		if _, err := a.Commands.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: ten, InquiryID: res.InquiryID, Actor: admin}}); err != nil {
			t.Fatal(err)
		}
		apptest.CatchUp(t, a)
		if a.DB.Dialect == sqldb.Postgres {
			assertNoColumnHolds(t, a.DB, secrets, "")
			return
		}
		closed = true
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(cfg.DataDir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s still holds %q", e.Name(), s)
				}
			}
		}
		if len(entries) == 0 || !strings.HasPrefix(entries[0].Name(), "casebook") {
			t.Fatalf("data directory = %v", entries)
		}
	})
}

// TestSealLegacyRefusedOnKurrentDB: KurrentDB's events are immutable; the migration says so
// (sealed.ErrImmutable) and changes nothing.
func TestSealLegacyRefusedOnKurrentDB(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	conn, _ := kurrenttest.Start(t)
	a := apptest.Open(t, app.Config{DatabaseURL: url, EventStoreURL: conn, Logger: slog.New(slog.DiscardHandler), DueTick: -1, RetentionTick: -1})
	if _, err := a.SealLegacy(t.Context(), ""); !errors.Is(err, sealed.ErrImmutable) {
		t.Fatalf("seal-legacy on KurrentDB: err = %v, want ErrImmutable", err)
	}
}

// TestErasureOnKurrentDB: with events in KurrentDB (the in-process test server) and keys in
// Postgres, the personal fields reach the event store only sealed, and after an erasure no
// Postgres column holds them while the inquiry reads "[erased]".
func TestErasureOnKurrentDB(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	conn, _ := kurrenttest.Start(t)
	a := apptest.Open(t, app.Config{DatabaseURL: url, EventStoreURL: conn, Logger: slog.New(slog.DiscardHandler), DueTick: -1, RetentionTick: -1})
	ctx := t.Context()
	ten, admin, op := apptest.TenantWithOperator(t, a, "acme")
	secrets := []string{"Kurrent Kestrel", "kestrel.k9902@example.org", "Subject-Teal-3390", "Message-Cyan-8841", "Note-Azure-1176"}
	res, err := a.Commands.Intake(ctx, commands.Intake{Tenant: ten, Source: domain.SourcePublicForm, IdempotencyKey: "k1",
		Requester: domain.Requester{Name: secrets[0], Email: secrets[1]}, Subject: secrets[2], Message: secrets[3], Category: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commands.AddNote(ctx, commands.AddNote{Target: commands.Target{Tenant: ten, InquiryID: res.InquiryID, Actor: op}, Body: secrets[4]}); err != nil {
		t.Fatal(err)
	}
	raw, err := kurrent.Open(ctx, conn, kurrent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	recs, err := raw.ReadStream(ctx, eventstore.InquiryStream(ten, res.InquiryID), 0, 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("raw events = %d %v", len(recs), err)
	}
	for _, r := range recs {
		for _, s := range secrets {
			if bytes.Contains(r.Data, []byte(s)) {
				t.Fatalf("KurrentDB holds %q in clear", s)
			}
		}
	}
	apptest.CatchUp(t, a)
	if _, err := a.Commands.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: ten, InquiryID: res.InquiryID, Actor: admin}}); err != nil {
		t.Fatal(err)
	}
	apptest.CatchUp(t, a)
	q, err := a.Commands.Load(ctx, ten, res.InquiryID)
	if err != nil || !q.Erased || q.Message != domain.Erased || q.Requester.Email != domain.Erased {
		t.Fatalf("after erasure = %+v %v", q, err)
	}
	assertNoColumnHolds(t, a.DB, secrets, "")
}

// TestLegacyReasonsErased: reasons written in clear before they were sealed (a transition's, an
// archive's, an unarchive's, a legal hold's placed and released) read as written while the
// inquiry lives, and its erasure alone, with no seal-legacy run, rewrites them in the backend:
// no raw event holds one afterwards and every read says "[erased]". SQLite and Postgres.
func TestLegacyReasonsErased(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		cfg.Logger, cfg.DueTick, cfg.RetentionTick = slog.New(slog.DiscardHandler), -1, -1
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		ten, admin, op := apptest.TenantWithOperator(t, a, "acme")
		var raw eventstore.Store
		var err error
		if a.DB.Dialect == sqldb.Postgres {
			raw, err = postgres.New(ctx, a.DB.PgxPool(), postgres.Options{})
		} else {
			raw, err = sqlite.New(ctx, a.DB, sqlite.Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		legacy := *a.Commands
		legacy.Store, legacy.Keys = raw, nil
		res, err := legacy.Intake(ctx, commands.Intake{Tenant: ten, Source: domain.SourcePublicForm, IdempotencyKey: "old",
			Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}, Subject: "Invoice twice", Message: "Charged twice.", Category: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		id := res.InquiryID
		reasons := []string{"Legacy-Waiting-Olive-7070", "Legacy-Archive-Plum-8080", "Legacy-Unarchive-Sage-9090", "Legacy-Hold-Teak-1212", "Legacy-Release-Yew-1313"}
		on := func(as domain.Principal) commands.Target {
			return commands.Target{Tenant: ten, InquiryID: id, Actor: as}
		}
		for _, step := range []func() (commands.Result, error){
			func() (commands.Result, error) {
				return legacy.Transition(ctx, commands.Transition{Target: on(op), To: domain.StatusTriaged, Priority: domain.PriorityNormal})
			},
			func() (commands.Result, error) {
				return legacy.Transition(ctx, commands.Transition{Target: on(op), To: domain.StatusInProgress})
			},
			func() (commands.Result, error) {
				return legacy.Transition(ctx, commands.Transition{Target: on(op), To: domain.StatusWaiting, Reason: reasons[0]})
			},
			func() (commands.Result, error) {
				return legacy.Archive(ctx, commands.Archive{Target: on(op), Reason: reasons[1]})
			},
			func() (commands.Result, error) {
				return legacy.Unarchive(ctx, commands.Unarchive{Target: on(op), Reason: reasons[2]})
			},
			func() (commands.Result, error) {
				return legacy.Hold(ctx, commands.Hold{Target: on(admin), Reason: reasons[3]})
			},
			func() (commands.Result, error) {
				return legacy.Hold(ctx, commands.Hold{Target: on(admin), Release: true, Reason: reasons[4]})
			},
		} {
			if _, err := step(); err != nil {
				t.Fatal(err)
			}
		}
		stream := eventstore.InquiryStream(ten, id)
		holds := func(s eventstore.Store) string {
			t.Helper()
			recs, err := s.ReadStream(ctx, stream, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var all []byte
			for _, r := range recs {
				all = append(append(all, r.Data...), '\n')
			}
			return string(all)
		}
		for _, r := range reasons {
			if !strings.Contains(holds(raw), r) || !strings.Contains(holds(a.Store), r) {
				t.Fatalf("%q is not readable before erasure", r)
			}
		}
		if _, err := a.Commands.Erase(ctx, commands.Erase{Target: on(admin)}); err != nil {
			t.Fatal(err)
		}
		opened := holds(a.Store)
		for _, r := range reasons {
			if strings.Contains(holds(raw), r) || strings.Contains(opened, r) {
				t.Errorf("%q is still held after erasure", r)
			}
		}
		if n := strings.Count(opened, `"reason":"`+domain.Erased+`"`); n != len(reasons) {
			t.Errorf("%d reasons read erased, want %d: %s", n, len(reasons), opened)
		}
	})
}
