package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlackInstallLinkCommand: `casebook slack install-link` prints a one-time install URL under
// the public URL with its expiry, a fresh one each time, and refuses without a usable public URL.
func TestSlackInstallLinkCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if code, _, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCLI(t, "slack", "install-link", "--tenant", "acme", "--public-url", "casebook.example", "--data-dir", dir); code == 0 || !strings.Contains(stderr, "public_url") {
		t.Fatalf("relative public URL: exit %d, %q", code, stderr)
	}
	seen := map[string]bool{}
	for range 2 {
		code, stdout, stderr := runCLI(t, "slack", "install-link", "--tenant", "acme", "--public-url", "https://casebook.example", "--data-dir", dir)
		var out struct {
			URL     string `json:"install_url"`
			Expires string `json:"expires_at"`
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || !strings.HasPrefix(out.URL, "https://casebook.example/slack/install/") || out.Expires == "" {
			t.Fatalf("install-link: exit %d, %q, %q", code, stdout, stderr)
		}
		if seen[out.URL] {
			t.Fatal("the same link twice")
		}
		seen[out.URL] = true
	}
}
