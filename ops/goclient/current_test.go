package goclient_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedClientIsCurrent regenerates the client from adapters/httpapi/openapi.json with the
// pinned ogen (go.mod's tool directive; offline once its module is downloaded) and fails when the
// committed casebookapi differs: the client that the walk-through drives is the one the document
// describes today.
func TestGeneratedClientIsCurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command("go", "tool", "ogen", "-config", "ogen.yml", "-package", "casebookapi", "-target", dir, "-clean",
		"../../adapters/httpapi/openapi.json")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ogen: %v\n%s", err, out)
	}
	fresh, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join("casebookapi", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) == 0 || len(fresh) != len(committed) {
		t.Fatalf("ogen wrote %d files, casebookapi holds %d: run go generate ./... in ops/goclient", len(fresh), len(committed))
	}
	for _, f := range fresh {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("casebookapi", filepath.Base(f)))
		if err != nil {
			t.Fatalf("%v: run go generate ./... in ops/goclient", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("casebookapi/%s is not what ogen generates from openapi.json: run go generate ./... in ops/goclient", filepath.Base(f))
		}
	}
}
