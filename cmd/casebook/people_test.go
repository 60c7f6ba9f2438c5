package main

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
)

// TestPeopleCommands: tenants list; principals list (linked Slack users, never a token);
// principals disable/enable/set-role/set-team; slack unlink-user; the last enabled admin refused
// with what to do; every change, refused ones too, in the admin audit as cli:<user>.
func TestPeopleCommands(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	fake := fakeslack.NewTestServer(t, fakeslack.Options{})
	run := func(args ...string) (int, map[string]any, string, string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, append(args, "--data-dir", dir)...)
		var out map[string]any
		_ = json.Unmarshal([]byte(stdout), &out)
		return code, out, stdout, stderr
	}
	must := func(args ...string) (map[string]any, string) {
		t.Helper()
		code, out, stdout, stderr := run(args...)
		if code != 0 {
			t.Fatalf("casebook %s = exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out, stdout
	}
	created, _ := must("tenants", "create", "--slug", "acme")
	adminToken := created["admin_token"].(string)
	must("tenants", "create", "--slug", "globex")
	out, _ := must("tenants", "list")
	if items, _ := out["items"].([]any); len(items) != 2 || items[0].(map[string]any)["slug"] != "acme" {
		t.Fatalf("tenants list = %v", out)
	}
	op, _ := must("principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator", "--team", "support")
	opID, opToken := op["principal_id"].(string), op["token"].(string)
	must("slack", "install", "--tenant", "acme", "--token", fake.Token(), "--signing-secret", "s", "--slack-api-url", fake.URL())
	must("slack", "link-user", "--tenant", "acme", "--slack-user", "U0OLGA00001", "--principal", opID)

	list := func() (map[string]map[string]any, string) {
		t.Helper()
		out, raw := must("principals", "list", "--tenant", "acme")
		byName := map[string]map[string]any{}
		for _, it := range out["items"].([]any) {
			m := it.(map[string]any)
			byName[m["name"].(string)] = m
		}
		return byName, raw
	}
	ps, raw := list()
	for _, secret := range []string{adminToken, opToken, "cb_", "hash"} {
		if strings.Contains(raw, secret) {
			t.Fatalf("principals list shows %q: %s", secret, raw)
		}
	}
	if users, _ := ps["Olga"]["slack_users"].([]any); len(users) != 1 || users[0].(map[string]any)["slack_user"] != "U0OLGA00001" ||
		ps["Olga"]["role"] != "operator" || ps["Olga"]["team"] != "support" || ps["Olga"]["id"] != opID {
		t.Fatalf("Olga listed as %v", ps["Olga"])
	}
	adminID := ps["admin"]["id"].(string)

	if out, _ := must("principals", "disable", "--tenant", "acme", "--id", opID, "--reason", "left the company"); out["after"].(map[string]any)["disabled"] != true {
		t.Fatalf("disable = %v", out)
	}
	if ps, _ := list(); ps["Olga"]["disabled"] != true || ps["Olga"]["disabled_reason"] != "left the company" {
		t.Fatalf("Olga after disable = %v", ps["Olga"])
	}
	must("principals", "enable", "--tenant", "acme", "--id", opID)
	if code, _, _, stderr := run("principals", "disable", "--tenant", "acme", "--id", adminID); code == 0 || !strings.Contains(stderr, "last enabled admin") {
		t.Fatalf("disable the last admin = exit %d %q", code, stderr)
	}
	if code, _, _, stderr := run("principals", "set-role", "--tenant", "acme", "--id", adminID, "--role", "viewer"); code == 0 || !strings.Contains(stderr, "make another principal admin first") {
		t.Fatalf("demote the last admin = exit %d %q", code, stderr)
	}
	if code, _, _, stderr := run("principals", "disable", "--tenant", "globex", "--id", opID); code == 0 || !strings.Contains(stderr, "not found") {
		t.Fatalf("another tenant's principal = exit %d %q", code, stderr)
	}
	must("principals", "set-role", "--tenant", "acme", "--id", opID, "--role", "admin")
	if code, _, _, stderr := run("principals", "set-team", "--tenant", "acme", "--id", opID); code == 0 || !strings.Contains(stderr, "--team") {
		t.Fatalf("set-team without --team = exit %d %q", code, stderr)
	}
	must("principals", "set-team", "--tenant", "acme", "--id", opID, "--team", "")
	if ps, _ := list(); ps["Olga"]["role"] != "admin" || ps["Olga"]["team"] != nil || ps["Olga"]["disabled"] != nil {
		t.Fatalf("Olga after set-role, set-team \"\" and enable = %v", ps["Olga"])
	}
	if out, _ := must("slack", "unlink-user", "--tenant", "acme", "--slack-user", "U0OLGA00001"); len(out["unlinked"].([]any)) != 1 {
		t.Fatalf("unlink = %v", out)
	}
	if code, _, _, stderr := run("slack", "unlink-user", "--tenant", "acme", "--slack-user", "U0OLGA00001"); code == 0 || !strings.Contains(stderr, "not linked") {
		t.Fatalf("unlink twice = exit %d %q", code, stderr)
	}
	if ps, _ := list(); len(ps["Olga"]["slack_users"].([]any)) != 0 {
		t.Fatalf("still linked: %v", ps["Olga"])
	}

	a, err := app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	audit, err := commands.NewAdminAudit(t.Context(), a.DB)
	if err != nil {
		t.Fatal(err)
	}
	ten, err := a.Tenancy.TenantBySlug(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := audit.Recent(t.Context(), ten.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if !strings.HasPrefix(string(r.Actor), "cli:") {
			t.Errorf("audit actor %q, want cli:<user>", r.Actor)
		}
		got = append(got, r.Action+" "+string(r.Outcome)+" "+r.Code)
	}
	want := []string{"principal.disable accepted ", "principal.enable accepted ", "principal.disable refused conflict",
		"principal.set-role refused conflict", "principal.set-role accepted ", "principal.set-team accepted ",
		"slack.unlink_user accepted ", "slack.unlink_user refused not_found"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("admin audit:\n got %q\nwant %q", got, want)
	}
	if rows[len(rows)-1].Reason != "left the company" || rows[len(rows)-2].Reason != noReason {
		t.Errorf("reasons: %q, %q", rows[len(rows)-1].Reason, rows[len(rows)-2].Reason)
	}
}
