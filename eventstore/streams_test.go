package eventstore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

func TestStreamKinds(t *testing.T) {
	for _, c := range []struct {
		stream string
		tenant domain.TenantID
		kind   eventstore.StreamKind
		owned  bool
	}{
		{eventstore.InquiryStream("t1", "a-1"), "t1", eventstore.KindInquiry, true},
		{eventstore.KindSlackDue.Stream("t1", "a"), "t1", eventstore.KindSlackDue, true},
		{eventstore.KindInstallation.Tenant("t1"), "t1", eventstore.KindInstallation, true},
		{eventstore.KindListProjection.Stream("t1", "F1"), "t2", eventstore.KindListProjection, false}, // another tenant
		{"inquiry-t10-a", "t1", eventstore.KindInquiry, false},                                         // tenant a prefix of another
		{"installation-t10", "t1", eventstore.KindInstallation, false},
		{"inquiry-t1-a", "", eventstore.KindInquiry, false}, // no tenant owns anything
		{"mystery-t1-a", "t1", "", false},                   // unregistered
	} {
		k, ok := eventstore.KindOf(c.stream)
		if k != c.kind || ok != (c.kind != "") {
			t.Errorf("KindOf(%q) = %q, %v; want %q", c.stream, k, ok, c.kind)
		}
		if got := eventstore.OwnedBy(c.stream, c.tenant); got != c.owned {
			t.Errorf("OwnedBy(%q, %q) = %v, want %v", c.stream, c.tenant, got, c.owned)
		}
	}
}

// TestStreamKindsSpelledOnce: outside the registry (streams.go) and tests, no Go file builds a
// stream name from a kind's prefix spelled as a literal ("inquiry-" + …, "inquiry-%s"): stream
// names come from the kinds. Other text that starts alike ("tenant-cache-ttl") is not a stream.
func TestStreamKindsSpelledOnce(t *testing.T) {
	var prefixes []string
	for _, k := range eventstore.StreamKinds() {
		prefixes = append(prefixes, k.Prefix())
	}
	fset := token.NewFileSet()
	scanned := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "ops" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			filepath.Base(path) == "streams.go" || strings.Contains(path, "eventstoretest") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, p := range prefixes {
				if s == p || strings.HasPrefix(s, p+"%") {
					t.Errorf("%s: %q spells the stream kind %q: use eventstore's StreamKind", fset.Position(lit.Pos()), s, p)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d files: the walk missed the tree", scanned)
	}
}
