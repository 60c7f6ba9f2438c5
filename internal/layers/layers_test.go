package layers_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/casebook/casebook/internal/layers"
)

// TestCheckRefusesViolations: the rule fails on deliberate violations of each kind, and passes the
// same packages without them.
func TestCheckRefusesViolations(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return layers.Module + "/" + p }
	ok := []layers.Package{
		{Path: m("domain"), Imports: []string{"fmt", "time"}},
		{Path: m("commands"), Imports: []string{m("domain"), m("eventstore"), m("internal/sqldb")}},
		{Path: m("adapters/httpapi"), Imports: []string{m("commands"), m("projections"), "github.com/gorilla/mux"}},
		{Path: m("app"), Imports: []string{m("adapters/httpapi"), m("eventstore/sqlite")}},
	}
	if v := layers.Check(ok); len(v) != 0 {
		t.Fatalf("a clean tree has violations: %v", v)
	}
	for name, bad := range map[string]layers.Package{
		"domain imports a module package": {Path: m("domain"), Imports: []string{m("eventstore")}},
		"domain imports a dependency":     {Path: m("domain"), Imports: []string{"github.com/google/uuid"}},
		"core imports an adapter":         {Path: m("commands"), Imports: []string{m("adapters/httpapi")}},
		"projection imports an adapter":   {Path: m("projections/querymodel"), Imports: []string{m("adapters/slack/lists")}},
		"adapter imports the wiring":      {Path: m("adapters/console"), Imports: []string{m("app")}},
		"helper imports the domain":       {Path: m("internal/sqldb"), Imports: []string{m("domain")}},
		"unclassified package":            {Path: m("newthing"), Imports: nil},
	} {
		if v := layers.Check(append(append([]layers.Package{}, ok...), bad)); len(v) != 1 {
			t.Errorf("%s: violations %v, want exactly one", name, v)
		}
	}
}

// TestTreeKeepsLayers checks the module as it is (make lint runs it).
func TestTreeKeepsLayers(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-e", "-json", layers.Module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []layers.Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath           string
			Imports, TestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, layers.Package{Path: p.ImportPath, Imports: append(p.Imports, p.TestImports...)})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the check would pass vacuously", len(pkgs))
	}
	if v := layers.Check(pkgs); len(v) > 0 {
		t.Fatalf("layering violations:\n%s", strings.Join(v, "\n"))
	}
}
