package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestSlackEscalationCommand: `casebook slack escalation` sets, shows and clears a tenant's
// escalation destination, validates the clearance, asks Slack whether the bot is in the channel
// (refused with how to invite it when not), and records each change with the OS user.
func TestSlackEscalationCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{"C0ONCALL001"}})
	fake.AddChannelWithoutBot("C0NOBOT0001")
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
	if code, _, stderr := run("slack", "escalation", "--tenant", "acme", "--channel", "C0ONCALL001", "--clearance", "secret"); code == 0 || !strings.Contains(stderr, "clearance") {
		t.Fatalf("bad clearance: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run("slack", "escalation", "--tenant", "acme", "--channel", "C0NOBOT0001", "--clearance", "internal"); code == 0 || !strings.Contains(stderr, "/invite") {
		t.Fatalf("channel without the bot: exit %d, %q", code, stderr)
	}
	if code, out, stderr := run("slack", "escalation", "--tenant", "acme", "--channel", "C0ONCALL001", "--clearance", "internal"); code != 0 || out["channel"] != "C0ONCALL001" || out["clearance"] != "internal" || out["checked"] != "bot is a member" {
		t.Fatalf("set: exit %d, %v, %q", code, out, stderr)
	}
	if code, out, _ := run("slack", "escalation", "--tenant", "acme", "--show"); code != 0 || out["channel"] != "C0ONCALL001" {
		t.Fatalf("show: exit %d, %v", code, out)
	}
	if code, out, _ := run("slack", "escalation", "--tenant", "acme", "--clear"); code != 0 || out["escalation_destination"] != nil {
		t.Fatalf("clear: exit %d, %v", code, out)
	}
	if code, out, _ := run("slack", "escalation", "--tenant", "acme", "--show"); code != 0 || out["escalation_destination"] != nil || len(out) != 1 {
		t.Fatalf("show after clear: exit %d, %v", code, out)
	}
}
