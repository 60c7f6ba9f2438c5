package scenarios

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines keeps the README a newcomer's page; reference goes to docs/.
const maxReadmeLines = 400

// TestDocsLinksResolve checks that every relative link of the README and of docs/*.md names a file
// of the repository and, with a #fragment, a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../scenarios/CONTRACT.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, page := range pages {
		body, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(string(body)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			checked++
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			dest, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !headingAnchors(string(dest))[frag] {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link checked")
	}
}

// TestReadmeIsShort keeps the README within maxReadmeLines and linking every page of docs/.
func TestReadmeIsShort(t *testing.T) {
	body, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), "\n"); n > maxReadmeLines {
		t.Errorf("README has %d lines, at most %d: move reference to docs/", n, maxReadmeLines)
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if name := "docs/" + filepath.Base(p); !strings.Contains(string(body), "]("+name+")") {
			t.Errorf("README does not link %s", name)
		}
	}
}

var fence = regexp.MustCompile("(?s)```.*?```")

// stripCode drops fenced code blocks, whose brackets are not links.
func stripCode(s string) string { return fence.ReplaceAllString(s, "") }

// headingAnchors returns the fragment ids GitHub gives the headings of a Markdown page.
func headingAnchors(md string) map[string]bool {
	ids := map[string]bool{}
	for _, line := range strings.Split(stripCode(md), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		ids[b.String()] = true
	}
	return ids
}
