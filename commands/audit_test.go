package commands_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/queries"
)

var auditTime = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func (tb *testBundle) audited(t *testing.T) (*commands.Audited, *commands.AuditLog) {
	t.Helper()
	l, err := commands.NewAuditLog(t.Context(), tb.db)
	if err != nil {
		t.Fatal(err)
	}
	return &commands.Audited{Next: tb.h, Sink: l, Now: func() time.Time { return auditTime }}, l
}

// TestRefusalsInCommandLayer calls the command handler directly, with no HTTP layer in front: role
// and team policy still refuse, and nothing is appended.
func TestRefusalsInCommandLayer(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	in := tb.receive(t, "k")
	viewer, _, err := tb.tenancy.CreatePrincipal(ctx, "acme", "Vic", domain.RoleViewer, "support")
	if err != nil {
		t.Fatal(err)
	}
	billing, _, err := tb.tenancy.CreatePrincipal(ctx, "acme", "Bill", domain.RoleOperator, "billing")
	if err != nil {
		t.Fatal(err)
	}
	at := func(p domain.Principal) commands.Target {
		return commands.Target{Tenant: p.TenantID, InquiryID: in.InquiryID, Actor: p, IfVersion: ver(1)}
	}
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"viewer triages", func() error {
			_, err := tb.h.Transition(ctx, commands.Transition{Target: at(viewer), To: domain.StatusTriaged})
			return err
		}, domain.ErrForbidden},
		{"viewer cancels", func() error {
			_, err := tb.h.Cancel(ctx, commands.Cancel{Target: at(viewer), Reason: "spam"})
			return err
		}, domain.ErrForbidden},
		{"viewer claims", func() error { _, err := tb.h.Claim(ctx, commands.Claim{Target: at(viewer)}); return err }, domain.ErrForbidden},
		{"viewer notes", func() error {
			_, err := tb.h.AddNote(ctx, commands.AddNote{Target: at(viewer), Body: "x"})
			return err
		}, domain.ErrForbidden},
		{"viewer assigns", func() error {
			_, err := tb.h.Assign(ctx, commands.Assign{Target: at(viewer), Owner: tb.ops[0].ID})
			return err
		}, domain.ErrForbidden},
		{"operator assigns to another team", func() error {
			_, err := tb.h.Assign(ctx, commands.Assign{Target: at(tb.ops[0]), Owner: billing.ID})
			return err
		}, domain.ErrForbidden},
		{"operator of another team assigns into support", func() error {
			_, err := tb.h.Assign(ctx, commands.Assign{Target: at(billing), Owner: tb.ops[0].ID})
			return err
		}, domain.ErrForbidden},
		{"assign to a viewer", func() error {
			_, err := tb.h.Assign(ctx, commands.Assign{Target: at(tb.admin), Owner: viewer.ID})
			return err
		}, domain.ErrValidation},
		{"another tenant's admin", func() error {
			_, err := tb.h.Claim(ctx, commands.Claim{Target: at(tb.otherOrg)})
			return err
		}, domain.ErrNotFound},
		{"actor of another tenant under this tenant", func() error {
			tg := at(tb.otherOrg)
			tg.Tenant = tb.tenant
			_, err := tb.h.AddNote(ctx, commands.AddNote{Target: tg, Body: "x"})
			return err
		}, domain.ErrNotFound},
	}
	for _, tt := range tests {
		if err := tt.run(); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if n := tb.streamLen(t, in.InquiryID); n != 1 {
		t.Fatalf("refused commands appended: stream has %d events", n)
	}
	// The admin may assign across teams; the operator within its own.
	if _, err := tb.h.Assign(ctx, commands.Assign{Target: at(tb.admin), Owner: billing.ID}); err != nil {
		t.Fatalf("admin assigns across teams: %v", err)
	}
	if _, err := tb.h.Assign(ctx, commands.Assign{Target: commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: billing, IfVersion: ver(2)}, Owner: billing.ID}); err != nil {
		t.Fatalf("operator assigns to itself: %v", err)
	}
}

// TestAuditEntries: the decorator records accepted, replayed and refused commands (a refusal although
// nothing was appended), each under the actor's tenant, with no personal data anywhere in the table.
func TestAuditEntries(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	a, l := tb.audited(t)
	c := intake("k")
	c.Tenant, c.CorrelationID = tb.tenant, "req_1"
	in, err := a.Intake(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	c.CorrelationID = "req_2"
	if _, err := a.Intake(ctx, c); err != nil {
		t.Fatal(err)
	}
	bad := intake("k2")
	bad.Tenant, bad.CorrelationID, bad.Requester.Email = tb.tenant, "req_3", "not-an-address"
	if _, err := a.Intake(ctx, bad); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("bad intake: %v", err)
	}
	viewer, _, err := tb.tenancy.CreatePrincipal(ctx, "acme", "Vic", domain.RoleViewer, "")
	if err != nil {
		t.Fatal(err)
	}
	target := func(p domain.Principal, req string) commands.Target {
		return commands.Target{Tenant: p.TenantID, InquiryID: in.InquiryID, Actor: p, CorrelationID: req}
	}
	if _, err := a.Claim(ctx, commands.Claim{Target: target(viewer, "req_4")}); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer claim: %v", err)
	}
	if _, err := a.Claim(ctx, commands.Claim{Target: target(tb.ops[0], "req_5")}); err != nil {
		t.Fatal(err)
	}
	stale := target(tb.ops[0], "req_6")
	stale.IfVersion = ver(1)
	if _, err := a.Transition(ctx, commands.Transition{Target: stale, To: domain.StatusResolved}); !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("stale transition: %v", err)
	}
	if _, err := a.AddNote(ctx, commands.AddNote{Target: target(tb.otherOrg, "req_7"), Body: "Ada's secret note"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("foreign note: %v", err)
	}
	if _, err := a.Cancel(ctx, commands.Cancel{Target: target(tb.ops[0], "req_8"), Reason: "customer Ada withdrew"}); err != nil {
		t.Fatal(err)
	}
	sys := domain.PrincipalID("system:public_form")
	want := []commands.AuditEntry{
		{RequestID: "req_1", Tenant: tb.tenant, Actor: sys, Command: "intake", InquiryID: in.InquiryID, Outcome: commands.OutcomeAccepted},
		{RequestID: "req_2", Tenant: tb.tenant, Actor: sys, Command: "intake", InquiryID: in.InquiryID, Outcome: commands.OutcomeReplayed},
		{RequestID: "req_3", Tenant: tb.tenant, Actor: sys, Command: "intake", Outcome: commands.OutcomeRefused, Code: "validation_failed"},
		{RequestID: "req_4", Tenant: tb.tenant, Actor: viewer.ID, Command: "claim", InquiryID: in.InquiryID, Outcome: commands.OutcomeRefused, Code: "forbidden"},
		{RequestID: "req_5", Tenant: tb.tenant, Actor: tb.ops[0].ID, Command: "claim", InquiryID: in.InquiryID, Outcome: commands.OutcomeAccepted},
		{RequestID: "req_6", Tenant: tb.tenant, Actor: tb.ops[0].ID, Command: "transition", InquiryID: in.InquiryID, Outcome: commands.OutcomeRefused, Code: "version_mismatch"},
		{RequestID: "req_8", Tenant: tb.tenant, Actor: tb.ops[0].ID, Command: "cancel", InquiryID: in.InquiryID, Outcome: commands.OutcomeAccepted},
	}
	for i := range want {
		want[i].At = auditTime
	}
	got, err := l.Entries(ctx, tb.tenant, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("acme's audit (-want +got):\n%s", diff)
	}
	foreign, err := l.Entries(ctx, tb.otherOrg.TenantID, 100)
	if err != nil || len(foreign) != 1 || foreign[0].Code != "not_found" || foreign[0].Actor != tb.otherOrg.ID {
		t.Fatalf("globex's audit = %+v, %v", foreign, err)
	}
	audit := dbtest.Strings(t, tb.db, `SELECT request_id || tenant_id || actor || command || inquiry_id || outcome || code FROM command_audit`)
	for _, s := range audit {
		for _, pii := range []string{"Ada", "ada@example.com", "Broken", "It broke", "Vic", "Olga", "secret", "withdrew"} {
			if strings.Contains(s, pii) {
				t.Errorf("audit row %q contains %q", s, pii)
			}
		}
	}
	if len(audit) != 8 {
		t.Fatalf("%d audit rows, want 8", len(audit))
	}
}

type failingSink struct{}

func (failingSink) Record(context.Context, commands.AuditEntry) error { return errors.New("disk full") }

// TestAuditWriteFailureKeepsAnswer: a failed audit write is logged and does not turn an executed
// command into an error the client would retry.
func TestAuditWriteFailureKeepsAnswer(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var logs bytes.Buffer
	a := &commands.Audited{Next: tb.h, Sink: failingSink{}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	c := intake("k")
	c.Tenant, c.CorrelationID = tb.tenant, "req_x"
	if _, err := a.Intake(t.Context(), c); err != nil {
		t.Fatalf("intake with a failing audit: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"audit write failed"`) || !strings.Contains(logs.String(), "req_x") {
		t.Fatalf("audit failure not logged: %s", logs.String())
	}
}

// TestAuditLogBackends: entries round-trip on SQLite and Postgres, per tenant, oldest first.
func TestAuditLogBackends(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		l, err := commands.NewAuditLog(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := commands.NewAuditLog(ctx, db); err != nil {
			t.Fatalf("migrating twice: %v", err)
		}
		var want []commands.AuditEntry
		for i, tenant := range []domain.TenantID{"t1", "t2", "t1", "t1"} {
			e := commands.AuditEntry{RequestID: "req_" + string(rune('a'+i)), Tenant: tenant, Actor: "p", Command: "claim",
				InquiryID: "i", Outcome: commands.OutcomeRefused, Code: "forbidden", At: auditTime.Add(time.Duration(i) * time.Second)}
			if err := l.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
			if tenant == "t1" {
				want = append(want, e)
			}
		}
		got, err := l.Entries(ctx, "t1", 2)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[1:], got); diff != "" {
			t.Fatalf("entries (-want +got):\n%s", diff)
		}
	})
}

// TestLogValuesRedact logs every type that holds personal data and finds none of it in the output.
func TestLogValuesRedact(t *testing.T) {
	t.Parallel()
	req := domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}
	p := domain.Principal{ID: "p1", TenantID: "t1", Name: "Olga Operator", Role: domain.RoleOperator, Team: "support"}
	tgt := commands.Target{Tenant: "t1", InquiryID: "i1", Actor: p}
	values := map[string]any{
		"principal":   p,
		"requester":   req,
		"new":         domain.NewInquiry{ID: "i1", Requester: req, Subject: "Invoice wrong", Message: "My invoice 42"},
		"received":    domain.InquiryReceived{InquiryID: "i1", Requester: req, Subject: "Invoice wrong", Message: "My invoice 42"},
		"note":        domain.NoteAdded{Body: "Called Ada back"},
		"inquiry":     domain.Inquiry{ID: "i1", Requester: req, Subject: "Invoice wrong", Message: "My invoice 42"},
		"inquiry_ptr": &domain.Inquiry{ID: "i1", Requester: req, Subject: "Invoice wrong", Message: "My invoice 42"},
		"intake":      commands.Intake{Tenant: "t1", Requester: req, Subject: "Invoice wrong", Message: "My invoice 42"},
		"add_note":    commands.AddNote{Target: tgt, Body: "Called Ada back"},
		"claim":       commands.Claim{Target: tgt},
		"transition":  commands.Transition{Target: tgt, To: domain.StatusResolved},
		"view":        queries.Inquiry{ID: "i1", Requester: &req, Subject: "Invoice wrong", Message: "My invoice 42"},
	}
	for name, v := range values {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "v", v)
		for _, pii := range []string{"Ada", "Lovelace", "ada@example.com", "Invoice wrong", "invoice 42", "Olga", "Called"} {
			if strings.Contains(buf.String(), pii) {
				t.Errorf("%s logs %q: %s", name, pii, buf.String())
			}
		}
		if !strings.Contains(buf.String(), `"v":{`) {
			t.Errorf("%s did not log as a group: %s", name, buf.String())
		}
	}
}

// TestAuditLogConcurrentRecords: concurrent records share commits and every one is stored once.
func TestAuditLogConcurrentRecords(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		l, err := commands.NewAuditLog(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		const n = 64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := l.Record(ctx, commands.AuditEntry{RequestID: fmt.Sprint("req_", i), Tenant: "t1", Actor: "p", Command: "claim",
					Outcome: commands.OutcomeAccepted, At: auditTime}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, err := l.Entries(ctx, "t1", 2*n)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range got {
			seen[e.RequestID] = true
		}
		if len(got) != n || len(seen) != n {
			t.Fatalf("%d entries, %d distinct, want %d", len(got), len(seen), n)
		}
	})
}

// TestAcceptedEntryCommitsWithItsAppend: on the embedded store an accepted command's audit entry is
// written in its append's transaction (no grouped write of its own), a replay's entry afterwards;
// and when the entry cannot be written the append fails with it, so nothing is accepted unaudited.
func TestAcceptedEntryCommitsWithItsAppend(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	a, l := tb.audited(t)
	c := intake("with-append")
	c.Tenant = tb.tenant
	before := tb.db.GroupStats().Calls
	res, err := a.Intake(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if calls := tb.db.GroupStats().Calls - before; calls != 1 {
		t.Fatalf("an accepted intake made %d grouped writes, want 1 (its append, holding the entry)", calls)
	}
	if _, err := a.Intake(ctx, c); err != nil { // replayed: nothing appended, entry written after
		t.Fatal(err)
	}
	got, err := l.Entries(ctx, tb.tenant, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Outcome != commands.OutcomeAccepted || got[0].InquiryID != res.InquiryID ||
		got[1].Outcome != commands.OutcomeReplayed || got[1].InquiryID != res.InquiryID {
		t.Fatalf("entries %+v, want accepted then replayed for %s", got, res.InquiryID)
	}

	if _, err := tb.db.ExecContext(ctx, `DROP TABLE command_audit`); err != nil {
		t.Fatal(err)
	}
	c = intake("unauditable")
	c.Tenant = tb.tenant
	logged, err := tb.store.ReadAll(ctx, eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Intake(ctx, c); err == nil {
		t.Fatal("an intake whose audit entry cannot be written was accepted")
	}
	if id, _, err := tb.h.FindIntake(ctx, tb.tenant, c.Source, c.IdempotencyKey); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the refused intake made inquiry %s (%v), want none", id, err)
	}
	if after, err := tb.store.ReadAll(ctx, eventstore.Start, 0); err != nil || len(after) != len(logged) {
		t.Fatalf("the refused intake appended: log of %d events, then %d (%v)", len(logged), len(after), err)
	}
}

// TestDueCommandsAuditInTheirAppend: the due-date and follow-up commands are audited like every
// other command: an accepted one's entry commits inside its append (one grouped write each).
func TestDueCommandsAuditInTheirAppend(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	a, l := tb.audited(t)
	c := intake("due-audit")
	c.Tenant = tb.tenant
	res, err := a.Intake(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	target := commands.Target{Tenant: tb.tenant, InquiryID: res.InquiryID, Actor: tb.ops[0]}
	before := tb.db.GroupStats().Calls
	if _, err := a.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target, In: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetDueDate(ctx, commands.SetDueDate{Target: target, DueAt: time.Now().Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if calls := tb.db.GroupStats().Calls - before; calls != 2 {
		t.Fatalf("two accepted due commands made %d grouped writes, want 2 (each append holding its entry)", calls)
	}
	got, err := l.Entries(ctx, tb.tenant, 10)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, e := range got {
		if e.Outcome != commands.OutcomeAccepted || e.InquiryID != res.InquiryID {
			t.Fatalf("entry %+v, want accepted for %s", e, res.InquiryID)
		}
		cmds = append(cmds, e.Command)
	}
	if len(cmds) != 3 || !slices.Contains(cmds, "follow_up") || !slices.Contains(cmds, "due_date") {
		t.Fatalf("audited commands %v, want intake, follow_up and due_date", cmds)
	}
}
