package scenarios

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeWalkthrough runs the README's walk-through block, as a new user would paste it, against
// a fresh server, and checks what it printed.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("README walk-through needs %s, which is not installed", tool)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- walkthrough[^>]*-->\n```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no walk-through block")
	}
	dataDir := t.TempDir()
	srv := start(t, dataDir)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", string(m[1]))
	cmd.Env = append(os.Environ(), "BASE="+srv.base, "CASEBOOK="+binary, "CASEBOOK_DATA_DIR="+dataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walk-through failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"status":"received"`, `ETag: "1"`, `"version":2`, `"version":4`, `"status": "resolved"`, "5 InquiryStatusChanged", "1 InquiryReceived",
		`"status": "open"`, " Cannot log in", "attached notes.txt (text/plain; charset=utf-8)", "portal token on an operator route: 403"} {
		if !strings.Contains(string(out), want) && !strings.Contains(strings.ToLower(string(out)), strings.ToLower(want)) {
			t.Errorf("walk-through output lacks %q:\n%s", want, out)
		}
	}
}
