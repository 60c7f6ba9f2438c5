package layers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// errorTextMatches finds, in src, comparisons of an error's text: x.Error() compared with == or !=,
// or passed to strings.Contains, HasPrefix, HasSuffix, EqualFold or Index.
func errorTextMatches(t *testing.T, name string, src any) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	isErrorCall := func(e ast.Expr) bool {
		c, ok := e.(*ast.CallExpr)
		if !ok || len(c.Args) != 0 {
			return false
		}
		s, ok := c.Fun.(*ast.SelectorExpr)
		return ok && s.Sel.Name == "Error"
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isErrorCall(n.X) || isErrorCall(n.Y)) {
				out = append(out, fset.Position(n.Pos()).String())
			}
		case *ast.CallExpr:
			s, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := s.X.(*ast.Ident)
			if !ok || pkg.Name != "strings" {
				return true
			}
			switch s.Sel.Name {
			case "Contains", "HasPrefix", "HasSuffix", "EqualFold", "Index", "TrimPrefix", "CutPrefix":
				for _, a := range n.Args {
					if isErrorCall(a) {
						out = append(out, fset.Position(n.Pos()).String())
					}
				}
			}
		}
		return true
	})
	return out
}

// TestNoErrorTextMatching: production code matches errors with errors.Is and errors.As, never by
// their text. The check itself finds a deliberate violation of each form.
func TestNoErrorTextMatching(t *testing.T) {
	t.Parallel()
	bad := `package x
import "strings"
func f(err error) bool { return strings.Contains(err.Error(), "UNIQUE") || err.Error() == "x" }`
	if got := errorTextMatches(t, "bad.go", bad); len(got) != 2 {
		t.Fatalf("the check found %v in the deliberate violations, want 2", got)
	}
	var found []string
	files := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		found = append(found, errorTextMatches(t, path, nil)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("scanned %d files; the check would pass vacuously", files)
	}
	if len(found) > 0 {
		t.Fatalf("errors matched by their text (use errors.Is/As):\n%s", strings.Join(found, "\n"))
	}
}
