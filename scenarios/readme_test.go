package scenarios

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeWalkthrough runs the README's walk-through block, as a new user would paste it, twice
// against one fresh server, and checks what each run printed.
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
	// Twice on the same data: a reader who pastes it again must not meet a duplicate tenant or a
	// replayed intake.
	for run := 1; run <= 2; run++ {
		walkthroughRun(t, run, string(m[1]), srv.base, dataDir)
	}
}

func walkthroughRun(t *testing.T, run int, block, base, dataDir string) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "BASE="+base, "CASEBOOK="+binary, "CASEBOOK_DATA_DIR="+dataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walk-through run %d failed: %v\n%s", run, err, out)
	}
	for _, want := range []string{`"status":"received"`, `ETag: "1"`, `"version":2`, `"version":4`, `"status": "resolved"`, "5 InquiryStatusChanged", "1 InquiryReceived",
		`"status": "open"`, " Cannot log in", "attached notes.txt (text/plain; charset=utf-8)", "portal token on an operator route: 403"} {
		if !strings.Contains(string(out), want) && !strings.Contains(strings.ToLower(string(out)), strings.ToLower(want)) {
			t.Errorf("walk-through run %d: output lacks %q:\n%s", run, want, out)
		}
	}
}
