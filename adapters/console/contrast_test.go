package console

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

// TestTextContrast: the stylesheet's text colours meet WCAG 2 AA (4.5:1) on the backgrounds they
// are used on. The colours are read from the embedded stylesheet, so changing one re-checks it.
func TestTextContrast(t *testing.T) {
	t.Parallel()
	css, err := staticFS.ReadFile("static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z]+):(#[0-9a-f]{6})`).FindAllStringSubmatch(string(css), -1) {
		vars[m[1]] = m[2]
	}
	rule := func(sel, prop string) string { // a literal colour of one rule
		m := regexp.MustCompile(regexp.QuoteMeta(sel) + `\{[^}]*?` + prop + `:(#[0-9a-f]{6})`).FindStringSubmatch(string(css))
		if m == nil {
			t.Fatalf("no %s in %s", prop, sel)
		}
		return m[1]
	}
	pairs := []struct{ what, fg, bg string }{
		{"text", vars["fg"], vars["bg"]},
		{"text on cards", vars["fg"], vars["card"]},
		{"hints on cards", vars["muted"], vars["card"]},
		{"links", vars["accent"], vars["bg"]},
		{"links on cards", vars["accent"], vars["card"]},
		{"buttons", "#ffffff", vars["accent"]},
		{"confirmations", vars["ok"], rule(".alert.ok", "background")},
		{"warnings", vars["warn"], rule(".alert.warn", "background")},
		{"errors", vars["err"], rule(".alert.error", "background")},
		{"status new", rule(".s-new", "color"), vars["card"]},
		{"status in progress", rule(".s-in_progress", "color"), vars["card"]},
		{"status waiting", rule(".s-waiting", "color"), vars["card"]},
		{"status cancelled", rule(".s-cancelled", "color"), vars["card"]},
	}
	for _, p := range pairs {
		if p.fg == "" || p.bg == "" {
			t.Fatalf("%s: colour missing from the stylesheet", p.what)
		}
		if r := contrast(p.fg, p.bg); r < 4.5 {
			t.Errorf("%s: %s on %s is %.2f:1, below 4.5:1", p.what, p.fg, p.bg, r)
		}
	}
}

// contrast is WCAG 2's contrast ratio of two #rrggbb colours.
func contrast(a, b string) float64 {
	lum := func(h string) float64 {
		var c [3]float64
		for i := range c {
			v, _ := strconv.ParseUint(h[1+2*i:3+2*i], 16, 8)
			x := float64(v) / 255
			if x <= 0.03928 {
				c[i] = x / 12.92
			} else {
				c[i] = math.Pow((x+0.055)/1.055, 2.4)
			}
		}
		return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
	}
	la, lb := lum(a), lum(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}
