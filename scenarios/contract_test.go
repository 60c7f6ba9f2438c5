package scenarios_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestContractNamesRealTests: every test CONTRACT.md cites as pkg.TestName (or pkg.TestPrefix*)
// exists in a package directory of that name, so a "covered" row cannot point at a test that was
// renamed or never written.
func TestContractNamesRealTests(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("CONTRACT.md")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{} // package directory name → its test files
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			tests[filepath.Base(filepath.Dir(path))] += string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`([a-z][a-z0-9]*)\\.((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)(\\*?)").FindAllStringSubmatch(string(doc), -1)
	if len(cited) < 50 {
		t.Fatalf("found %d cited tests; the check would pass vacuously", len(cited))
	}
	for _, c := range cited {
		pkg, name, prefix := c[1], c[2], c[3] == "*"
		pattern := `func ` + regexp.QuoteMeta(name)
		if !prefix {
			pattern += `\(`
		}
		if !regexp.MustCompile(pattern).MatchString(tests[pkg]) {
			t.Errorf("CONTRACT.md cites %s.%s%s, which no test file of a %q package defines", pkg, name, c[3], pkg)
		}
	}
}
