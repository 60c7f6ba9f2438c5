package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// TestRetentionAndExportCommands: casebook retention set validates and stores a policy that show
// prints back, and refuses a malformed one; casebook retention sweep catches the index up and
// reports (nothing is due here: the sweep itself is TestRetentionPolicyJob's); casebook
// export writes a requester's inquiries with their opened message, found by the address in
// another case, to a new file.
func TestRetentionAndExportCommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	a, err := app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Commands.Intake(t.Context(), commands.Intake{Tenant: ten.ID, Source: domain.SourceAPI, IdempotencyKey: "k1",
		Requester: domain.Requester{Name: "Ada", Email: "Ada.L@Example.com"}, Subject: "s", Message: "Message-Engine-1843"})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()

	bad := filepath.Join(t.TempDir(), "bad.json")
	good := filepath.Join(t.TempDir(), "good.json")
	writeFile(t, bad, `{"classes":{"x":{"archived_for":"5m"}}}`)
	writeFile(t, good, `{"classes":{"standard":{"archived_for":"90d","closed_for":"1h"}},"default_class":"standard"}`)
	if code, _, errOut := runCLI(t, "retention", "set", "--data-dir", dir, "--tenant", "acme", "--file", bad); code == 0 || !strings.Contains(errOut, "archived_for") {
		t.Fatalf("retention set bad = %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "retention", "show", "--data-dir", dir, "--tenant", "acme"); code == 0 || !strings.Contains(errOut, "no retention policy") {
		t.Fatalf("retention show before set = %d %s", code, errOut)
	}
	if code, out, errOut := runCLI(t, "retention", "set", "--data-dir", dir, "--tenant", "acme", "--file", good); code != 0 || !strings.Contains(out, `"archived_for": "90d"`) {
		t.Fatalf("retention set = %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "retention", "show", "--data-dir", dir, "--tenant", "acme"); code != 0 || !strings.Contains(out, `"closed_for": "1h0m0s"`) {
		t.Fatalf("retention show = %d %s %s", code, out, errOut)
	}
	// Nothing closed: nothing due.
	if code, out, errOut := runCLI(t, "retention", "sweep", "--data-dir", dir); code != 0 || !strings.Contains(out, `"erased": null`) {
		t.Fatalf("retention sweep = %d %s %s", code, out, errOut)
	}

	file := filepath.Join(t.TempDir(), "export.json")
	if code, out, errOut := runCLI(t, "export", "--data-dir", dir, "--tenant", "acme", "--email", "ADA.L@example.COM", "--out", file); code != 0 || !strings.Contains(out, `"inquiries": 1`) {
		t.Fatalf("export = %d %s %s", code, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "Message-Engine-1843") || !strings.Contains(string(b), string(res.InquiryID)) {
		t.Fatalf("export file = %s %v", b, err)
	}
	if code, _, _ := runCLI(t, "export", "--data-dir", dir, "--tenant", "acme", "--email", "ada.l@example.com", "--out", file); code == 0 {
		t.Fatal("export overwrote an existing file")
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSLACommands: casebook sla show names a tenant without a policy, sla set refuses a malformed
// document and stores a valid one that show prints back, and every set, refused or accepted, is in
// the command audit as the CLI's admin (the same path as retention set).
func TestSLACommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	a, err := app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	bad := filepath.Join(t.TempDir(), "bad.json")
	good := filepath.Join(t.TempDir(), "good.json")
	writeFile(t, bad, `{"time_zone":"Mars/Olympus","targets":{"normal":{"resolution":"8h"}}}`)
	writeFile(t, good, `{"time_zone":"Europe/Berlin","targets":{"normal":{"resolution":"8h"}}}`)
	if code, _, errOut := runCLI(t, "sla", "show", "--data-dir", dir, "--tenant", "acme"); code == 0 || !strings.Contains(errOut, "tenant acme has no SLA policy") {
		t.Fatalf("sla show before set = %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "sla", "set", "--data-dir", dir, "--tenant", "acme", "--file", bad); code == 0 || !strings.Contains(errOut, "Mars/Olympus") {
		t.Fatalf("sla set bad = %d %s", code, errOut)
	}
	if code, out, errOut := runCLI(t, "sla", "set", "--data-dir", dir, "--tenant", "acme", "--file", good); code != 0 || !strings.Contains(out, "Europe/Berlin") {
		t.Fatalf("sla set = %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "sla", "show", "--data-dir", dir, "--tenant", "acme"); code != 0 || !strings.Contains(out, "Europe/Berlin") {
		t.Fatalf("sla show = %d %s %s", code, out, errOut)
	}
	a, err = app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	entries, err := a.Audit.Entries(t.Context(), ten.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Command == "sla_policy" && strings.HasPrefix(string(e.Actor), "cli:") {
			got = append(got, string(e.Outcome))
		}
	}
	slices.Sort(got)
	if want := []string{"accepted", "refused"}; !slices.Equal(got, want) {
		t.Fatalf("sla_policy audit outcomes = %v, want %v", got, want)
	}
}
