package main

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// TestEraseCommand: casebook erase erases an inquiry as the CLI's admin (the tombstone is appended,
// the personal fields read "[erased]"), and is refused while a legal hold is in place.
func TestEraseCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	open := func() *app.App {
		a, err := app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := open()
	ten, admin, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	intake := func(key string) string {
		res, err := a.Commands.Intake(t.Context(), commands.Intake{Tenant: ten.ID, Source: domain.SourceAPI, IdempotencyKey: key,
			Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "s", Message: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.InquiryID)
	}
	free, held := intake("k1"), intake("k2")
	if _, err := a.Commands.Hold(t.Context(), commands.Hold{Target: commands.Target{Tenant: ten.ID, InquiryID: domain.InquiryID(held), Actor: admin},
		Reason: "litigation"}); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()

	if code, out, errOut := runCLI(t, "erase", "--data-dir", dir, "--tenant", "acme", "--inquiry", free); code != 0 || !strings.Contains(out, `"erased": true`) {
		t.Fatalf("erase = %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "erase", "--data-dir", dir, "--tenant", "acme", "--inquiry", held); code == 0 || !strings.Contains(errOut, "legal hold") {
		t.Fatalf("erase under hold = %d %s", code, errOut)
	}
	a = open()
	defer a.Close()
	q, err := a.Commands.Load(t.Context(), ten.ID, domain.InquiryID(free))
	if err != nil || !q.Erased || q.Subject != domain.Erased || q.Requester.Email != domain.Erased {
		t.Fatalf("after erase = %+v %v", q, err)
	}
	if q, _ := a.Commands.Load(t.Context(), ten.ID, domain.InquiryID(held)); q.Erased || q.Subject != "s" {
		t.Fatalf("held inquiry = %+v", q)
	}
}
