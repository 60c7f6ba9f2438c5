package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/casebook/casebook/internal/browsertest"
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
