package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/browsertest"
	"github.com/casebook/casebook/tenancy"
)

func (tb *testBundle) preflight(t *testing.T, slug, origin, method, headers string) resp {
	t.Helper()
	return tb.do(t, http.MethodOptions, "/v1/public/"+slug+"/inquiries", "", map[string]string{
		"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}, "")
}

// corsShape is a preflight answer without its per-request parts (request id, date).
func corsShape(r resp) string {
	var keys []string
	for k, v := range r.header {
		if k != "X-Request-Id" && k != "Date" {
			keys = append(keys, k+"="+strings.Join(v, ","))
		}
	}
	slices.Sort(keys)
	return fmt.Sprint(r.status, keys)
}

// TestCORSForTrustedOrigins: the tenant's trusted origins get a working preflight and allow headers
// on the intake's answers; other origins, other tenants and unknown tenants get no CORS header, and
// an unknown tenant's preflight looks exactly like an untrusted origin's.
func TestCORSForTrustedOrigins(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const trusted, evil = "https://acme.example", "https://evil.example"
	if _, err := tb.app.Tenancy.SetOrigins(t.Context(), "acme", []string{trusted}); err != nil {
		t.Fatal(err)
	}
	ok := tb.preflight(t, "acme", trusted, "POST", "content-type, idempotency-key")
	if ok.status != 204 || ok.header.Get("Access-Control-Allow-Origin") != trusted ||
		ok.header.Get("Access-Control-Allow-Methods") != "POST" || !strings.Contains(ok.header.Get("Access-Control-Allow-Headers"), "Idempotency-Key") {
		t.Fatalf("trusted preflight = %d %v", ok.status, ok.header)
	}
	refused := tb.preflight(t, "acme", evil, "POST", "content-type")
	for name, r := range map[string]resp{
		"untrusted origin": refused,
		"unknown tenant":   tb.preflight(t, "nope", trusted, "POST", "content-type"),
		"other tenant":     tb.preflight(t, "globex", trusted, "POST", "content-type"),
		"other method":     tb.preflight(t, "acme", trusted, "DELETE", ""),
		"other header":     tb.preflight(t, "acme", trusted, "POST", "content-type, x-admin"),
	} {
		if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("%s: preflight = %d %v, want 204 without CORS headers", name, r.status, r.header)
		}
		if (name == "unknown tenant" || name == "other tenant") && corsShape(r) != corsShape(refused) {
			t.Errorf("%s: preflight %s differs from an untrusted origin's %s", name, corsShape(r), corsShape(refused))
		}
	}
	post := func(origin string) resp {
		return tb.intake(t, "acme", map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site"}, submission)
	}
	if r := post(trusted); r.status != 202 || r.header.Get("Access-Control-Allow-Origin") != trusted || !strings.Contains(r.header.Get("Vary"), "Origin") {
		t.Fatalf("trusted POST = %d %v", r.status, r.header)
	}
	if r := post(evil); r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("untrusted POST = %d %v", r.status, r.header)
	}
	if r := tb.intake(t, "acme", nil, submission); r.status != 202 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("no Origin = %d %v", r.status, r.header)
	}
}

// TestRemovedOriginRefused: the public routes serve a tenant's trusted origins from memory
// (app.Config.TenantCacheTTL, 1 s by default). An origin removed through this process is refused
// by the next request; one removed by another process (a second tenancy store on the same
// database) is refused once the TTL has passed, and served until then.
func TestRemovedOriginRefused(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) { c.Public, c.Now = unlimited, clk.Now })
	ctx := t.Context()
	const a, b = "https://a.example", "https://b.example"
	if _, err := tb.app.Tenancy.SetOrigins(ctx, "acme", []string{a, b}); err != nil {
		t.Fatal(err)
	}
	post := func(origin string) int {
		return tb.intake(t, "acme", map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site"}, submission).status
	}
	allowed := func(origin string) bool {
		return tb.preflight(t, "acme", origin, "POST", "content-type").header.Get("Access-Control-Allow-Origin") == origin
	}
	if post(a) != 202 || post(b) != 202 || !allowed(a) || !allowed(b) {
		t.Fatal("trusted origins refused")
	}
	if _, err := tb.app.Tenancy.SetOrigins(ctx, "acme", []string{b}); err != nil {
		t.Fatal(err)
	}
	if got := post(a); got != 403 || allowed(a) {
		t.Fatalf("origin removed through this process: POST %d, preflight allowed %v; want 403 and no CORS", got, allowed(a))
	}
	other, err := tenancy.New(ctx, tb.app.DB, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.SetOrigins(ctx, "acme", nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(999 * time.Millisecond)
	if got := post(b); got != 202 || !allowed(b) {
		t.Fatalf("within the TTL of a change by another process: POST %d, preflight allowed %v; want the cached origins", got, allowed(b))
	}
	clk.Advance(time.Millisecond)
	if got := post(b); got != 403 || allowed(b) {
		t.Fatalf("after the TTL: POST %d, preflight allowed %v; want 403 and no CORS", got, allowed(b))
	}
}

// TestCORSInBrowser: a page on a trusted origin submits with fetch() (JSON and an Idempotency-Key:
// a preflighted request) and reads the receipt; a page on another origin cannot.
func TestCORSInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	tb := setup(t)
	api := tb.srv.URL + "/v1/public/acme/inquiries"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Partner site</title><h1>Partner site</h1><p id="out">…</p><script>
fetch(%q, {method: "POST", headers: {"Content-Type": "application/json", "Idempotency-Key": "portal-1"},
  body: JSON.stringify({name: "Ada", email: "ada@example.com", subject: "From the portal", message: "Hello"})})
  .then(r => r.json()).then(j => { document.getElementById("out").textContent = "receipt " + j.receipt })
  .catch(e => { document.getElementById("out").textContent = "blocked: " + e.name })
</script>`, api)
	}))
	t.Cleanup(page.Close)
	trusted := strings.Replace(page.URL, "127.0.0.1", "localhost", 1) // another origin than the API's
	other := page.URL                                                 // 127.0.0.1:port: same host, another port
	if _, err := tb.app.Tenancy.SetOrigins(t.Context(), "acme", []string{trusted}); err != nil {
		t.Fatal(err)
	}
	dir := browsertest.ScreenshotDir(t, "testdata/screenshots")
	read := func(url, shot string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("browser on %s: %v", url, err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById("out").textContent.startsWith("…")`)); err != nil {
			t.Fatalf("browser on %s: %v\nlogs:\n%s", url, err, tb.logs.String())
		}
		browsertest.Screenshot(t, ctx, dir, shot)
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("out").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := read(trusted, "cors-trusted-origin"); !strings.HasPrefix(out, "receipt CB-") {
		t.Fatalf("trusted origin: %q", out)
	}
	if out := read(other, "cors-untrusted-origin"); out != "blocked: TypeError" {
		t.Fatalf("untrusted origin: %q", out)
	}
	if n := tb.logLen(t); n != 1 {
		t.Fatalf("%d events, want the trusted page's one intake", n)
	}
}
