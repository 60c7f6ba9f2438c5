package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestListsCreateCommand: `casebook lists create` creates the List in Slack with Casebook's
// columns, grants the channel and viewers read access and the owner ownership, activates it and
// prints the List id, the grants and the projection; bad input is refused before any Slack call,
// and a refused grant names the List it left disabled.
func TestListsCreateCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{"C0OPS000001"}})
	run := func(args ...string) (int, map[string]any, string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, append(args, "--data-dir", dir)...)
		var out map[string]any
		_ = json.Unmarshal([]byte(stdout), &out)
		return code, out, stderr
	}
	if code, _, stderr := run("tenants", "create", "--slug", "acme"); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := run("slack", "install", "--tenant", "acme", "--token", fake.Token(), "--signing-secret", "s", "--slack-api-url", fake.URL()); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := run("lists", "create", "--tenant", "acme", "--name", "Inquiries", "--clearance", "internal", "--viewer", "alice"); code == 0 || !strings.Contains(stderr, "viewer") {
		t.Fatalf("bad viewer: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run("lists", "create", "--tenant", "acme", "--clearance", "internal"); code == 0 || !strings.Contains(stderr, "name") {
		t.Fatalf("no name: exit %d, %q", code, stderr)
	}
	if n := fake.CallCount("slackLists.create"); n != 0 {
		t.Fatalf("slackLists.create called %d times for bad input", n)
	}
	code, out, stderr := run("lists", "create", "--tenant", "acme", "--name", "Inquiries", "--clearance", "internal", "--channel", "C0OPS000001",
		"--viewer", "U0VIEWER001,U0VIEWER002", "--owner", "U0OWNER0001")
	if code != 0 {
		t.Fatalf("create: exit %d, %q", code, stderr)
	}
	id, _ := out["list_id"].(string)
	proj, _ := out["projection"].(map[string]any)
	acc, _ := out["access"].(map[string]any)
	if id == "" || proj["state"] != "active" || acc["owner"] != "U0OWNER0001" {
		t.Fatalf("create printed %v", out)
	}
	if got := fake.ListAccess(id); got["U0OWNER0001"] != "owner" || got["U0VIEWER002"] != "read" || got["C0OPS000001"] != "read" {
		t.Fatalf("access in Slack = %v", got)
	}
	code, stdout, _ := runCLI(t, "lists", "status", "--tenant", "acme", "--data-dir", dir)
	if code != 0 || !strings.Contains(stdout, `"owner": "U0OWNER0001"`) {
		t.Fatalf("status: exit %d, %s", code, stdout)
	}

	fake.AddRule(fakeslack.Rule{Method: "slackLists.access.set", Fault: fakeslack.SlackError(fakeslack.CodeRestrictedAction)})
	code, _, stderr = run("lists", "create", "--tenant", "acme", "--name", "Second", "--clearance", "internal", "--owner", "U0OWNER0001")
	if code == 0 || !strings.Contains(stderr, "was created but access failed") || !strings.Contains(stderr, "lists activate --list F") {
		t.Fatalf("refused grant: exit %d, %q", code, stderr)
	}
}
