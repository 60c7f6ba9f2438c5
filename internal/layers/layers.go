// Package layers is the layering rule of the module, checked by make lint (TestTreeKeepsLayers):
//
//	domain                                   the standard library only
//	internal/…                               leaf helpers: nothing of the module but other helpers
//	eventstore/…, tenancy, commands,         the domain, the helpers, and each other
//	  queries, duejobs
//	projections/…                            those
//	adapters/…                               those (peers among adapters are #13's depguard rule)
//	app/…, cmd/…, scenarios                  the wiring and the binary, on top: anything
//	internal/slacktest                       the tests' Slack set-up (it opens the app): on top
//
// A package may import packages of its own layer or of a lower one, never one above. The rule
// holds for a package's own files and its in-package tests; external test packages (package
// x_test) may import anything, because they stand outside x: an adapter's tests may exercise the
// assembled application.
package layers

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the module path the rule applies to.
const Module = "github.com/casebook/casebook"

// Layer numbers: higher may import lower. Bottom holds the two leaf layers, which import nothing
// above them and not each other.
const (
	Domain = iota
	Helpers
	Core
	Projections
	Adapters
	Top
)

// rules maps a path prefix (relative to Module) to its layer; the longest matching prefix wins.
var rules = []struct {
	prefix string
	layer  int
}{
	{"domain", Domain},
	{"internal", Helpers},
	{"eventstore", Core},
	{"tenancy", Core},
	{"commands", Core},
	{"queries", Core},
	{"duejobs", Core},
	{"projections", Projections},
	{"adapters", Adapters},
	{"app", Top},
	{"cmd", Top},
	{"scenarios", Top},
	{"internal/slacktest", Top},
}

// LayerOf returns the layer of a module package path (relative or absolute), and false when the
// rule does not classify it (a new top-level directory must be added to rules).
func LayerOf(path string) (int, bool) {
	rel, ok := strings.CutPrefix(path, Module+"/")
	if !ok {
		rel = path
	}
	best, layer := -1, 0
	for _, r := range rules {
		if (rel == r.prefix || strings.HasPrefix(rel, r.prefix+"/")) && len(r.prefix) > best {
			best, layer = len(r.prefix), r.layer
		}
	}
	return layer, best >= 0
}

// Package is what the rule needs of a package: its path and the imports of its own and in-package
// test files.
type Package struct {
	Path    string
	Imports []string
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// Check returns every violation of the rule among pkgs, sorted.
func Check(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := LayerOf(p.Path)
		if !ok {
			out = append(out, fmt.Sprintf("%s: not in the layer table (internal/layers)", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			own := imp == Module || strings.HasPrefix(imp, Module+"/")
			switch {
			case from == Domain && !isStd(imp):
				out = append(out, fmt.Sprintf("%s imports %s: domain imports the standard library only", p.Path, imp))
			case !own:
				continue
			default:
				to, ok := LayerOf(imp)
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("%s imports %s, which is not in the layer table", p.Path, imp))
				case to > from, from == Helpers && to != Helpers:
					out = append(out, fmt.Sprintf("%s imports %s: a package never imports one above it (layer %d → %d)", p.Path, imp, from, to))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
