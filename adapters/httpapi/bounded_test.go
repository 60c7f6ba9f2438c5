package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/ratelimit"
)

// TestUntrustedInputBoundsMetricsAndLogs: whatever an unauthenticated client sends (invented
// methods, paths, tenant slugs, field names), metric labels come from fixed sets — known methods or
// OTHER, route templates, status classes — and request-derived text in logs and errors is truncated.
func TestUntrustedInputBoundsMetricsAndLogs(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for _, m := range []string{"FOOBAR", "PROPFIND", "X" + strings.Repeat("Y", 200)} {
		r := tb.do(t, m, "/v1/public/acme/inquiries", "", nil, "")
		if r.status != http.StatusNotImplemented || r.code() != "method_not_implemented" {
			t.Fatalf("%.10s = %d %s, want 501", m, r.status, r.raw)
		}
	}
	for i := range 5 {
		tb.do(t, "GET", "/no/such/path/"+strings.Repeat("p", i*50), "", nil, "")
		tb.do(t, "GET", "/f/tenant-"+strings.Repeat("z", i+1), "", nil, "")
	}
	long := strings.Repeat("k", 5000)
	r := tb.intake(t, "acme", nil, `{"`+long+`":"x"}`)
	if r.status != 400 || len(r.raw) > 400 || strings.Contains(r.raw, long[:100]) {
		t.Fatalf("unknown long field = %d, %d bytes: %.200s", r.status, len(r.raw), r.raw)
	}
	m := tb.do(t, "GET", "/metrics", "", nil, "")
	for _, bad := range []string{"FOOBAR", "PROPFIND", "YYYY", "tenant-z", "acme", "globex", "/no/such", "pppp"} {
		if strings.Contains(m.raw, bad) {
			t.Errorf("metrics contain %q", bad)
		}
	}
	for _, want := range []string{`method="OTHER"`, `status="5xx"`, `route="unmatched"`, `route="/f/{tenant_slug}"`, `status="4xx"`} {
		if !strings.Contains(m.raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if st := regexp.MustCompile(`status="[^"]*"`).FindAllString(m.raw, -1); len(st) == 0 {
		t.Fatal("no status labels: the test would pass vacuously")
	} else {
		for _, s := range st {
			if !regexp.MustCompile(`^status="[1-5]xx"$`).MatchString(s) {
				t.Errorf("status label %s is not a class", s)
			}
		}
	}
	logs := tb.logs.String()
	for _, bad := range []string{"FOOBAR", "PROPFIND", "YYYY", long[:100]} {
		if strings.Contains(logs, bad) {
			t.Errorf("logs contain %.20q", bad)
		}
	}
	if !strings.Contains(logs, `"method":"OTHER"`) {
		t.Error(`logs lack "method":"OTHER"`)
	}
}

// TestFormPageRateLimited: the form page reveals whether a tenant exists, as an intake does, so it
// is rate-limited per client like intake — for existing and unknown tenants alike.
func TestFormPageRateLimited(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Public.ClientRate = ratelimit.Rate{Events: 1, Per: time.Minute, Burst: 2}
		c.Public.Now = clk.Now
	})
	if r := tb.do(t, "GET", "/f/acme", "", nil, ""); r.status != 200 {
		t.Fatalf("first view = %d", r.status)
	}
	if r := tb.do(t, "GET", "/f/nope", "", nil, ""); r.status != 404 {
		t.Fatalf("unknown tenant = %d", r.status)
	}
	for _, slug := range []string{"acme", "nope", "globex"} {
		r := tb.do(t, "GET", "/f/"+slug, "", nil, "")
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Fatalf("view of %s past the burst = %d Retry-After=%q", slug, r.status, r.header.Get("Retry-After"))
		}
	}
	// Page views do not spend the client's submissions.
	if r := tb.intake(t, "acme", nil, submission); r.status != 202 {
		t.Fatalf("intake after page views = %d %s", r.status, r.raw)
	}
	clk.Advance(time.Minute)
	if r := tb.do(t, "GET", "/f/acme", "", nil, ""); r.status != 200 {
		t.Fatalf("view after a minute = %d", r.status)
	}
}
