package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/ratelimit"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

var receiptRE = regexp.MustCompile(`^CB-[A-Z2-7]{16}$`)

func (tb *testBundle) intake(t *testing.T, slug string, headers map[string]string, body string) resp {
	t.Helper()
	return tb.do(t, "POST", "/v1/public/"+slug+"/inquiries", "", headers, body)
}

func (tb *testBundle) logLen(t *testing.T) int { t.Helper(); return apptest.LogLen(t, tb.app) }

// TestPublicBodyLimit: the configured body limit answers 413 before anything is decoded.
func TestPublicBodyLimit(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) { c.Public.MaxBody = 1024 })
	body := `{"email":"a@b.co","subject":"s","message":"` + strings.Repeat("x", 1100) + `"}`
	if r := tb.intake(t, "acme", nil, body); r.status != http.StatusRequestEntityTooLarge || r.code() != "body_too_large" {
		t.Fatalf("over the limit = %d %s", r.status, r.raw)
	}
	if r := tb.intake(t, "acme", nil, `{"email":"a@b.co","subject":"s","message":"`+strings.Repeat("x", 900)+`"}`); r.status != http.StatusAccepted {
		t.Fatalf("under the limit = %d %s", r.status, r.raw)
	}
}

// TestPublicClientRateLimit: a client gets its burst, then 429 with Retry-After; the clock moving
// on lets it in again. Behind a trusted proxy the client is the right-most untrusted
// X-Forwarded-For hop; without one, X-Forwarded-For is ignored, so it cannot dodge the limit.
// Client addresses never reach the logs.
func TestPublicClientRateLimit(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	limited := func(proxies []netip.Prefix) func(*app.Config) {
		return func(c *app.Config) {
			c.Public = unlimited
			c.Public.ClientRate = ratelimit.Rate{Events: 2, Per: time.Minute, Burst: 2}
			c.Public.TrustedProxies, c.Public.Now = proxies, clk.Now
		}
	}
	t.Run("direct", func(t *testing.T) {
		tb := setupWith(t, limited(nil))
		for i := range 2 {
			if r := tb.intake(t, "acme", map[string]string{"X-Forwarded-For": "198.51.100." + string(rune('1'+i))}, submission); r.status != http.StatusAccepted {
				t.Fatalf("request %d = %d %s", i, r.status, r.raw)
			}
		}
		r := tb.intake(t, "acme", map[string]string{"X-Forwarded-For": "198.51.100.9"}, submission)
		if r.status != http.StatusTooManyRequests || r.code() != "rate_limited" || r.header.Get("Retry-After") != "30" {
			t.Fatalf("over the limit = %d %s Retry-After=%q", r.status, r.raw, r.header.Get("Retry-After"))
		}
		clk.Advance(30 * time.Second)
		if r := tb.intake(t, "acme", nil, submission); r.status != http.StatusAccepted {
			t.Fatalf("after Retry-After = %d %s", r.status, r.raw)
		}
		if logs := tb.logs.String(); strings.Contains(logs, "127.0.0.1") || strings.Contains(logs, "198.51.100") || !strings.Contains(logs, `"reason":"client_rate_limit"`) {
			t.Fatalf("logs name a client address or lack the refusal:\n%s", logs)
		}
	})
	t.Run("behind a trusted proxy", func(t *testing.T) {
		tb := setupWith(t, limited([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}))
		via := func(xff string) map[string]string { return map[string]string{"X-Forwarded-For": xff} }
		// The client forges a left-most hop each time; the proxies append its real address.
		for i, xff := range []string{"1.1.1.1, 203.0.113.7, 10.0.0.2", "2.2.2.2, 203.0.113.7", "3.3.3.3, 203.0.113.7, 10.1.1.1"} {
			r := tb.intake(t, "acme", via(xff), submission)
			if want := map[bool]int{true: 202, false: 429}[i < 2]; r.status != want {
				t.Fatalf("request %d via %q = %d, want %d", i, xff, r.status, want)
			}
		}
		if r := tb.intake(t, "acme", via("203.0.113.8"), submission); r.status != http.StatusAccepted {
			t.Fatalf("another client behind the proxy = %d", r.status)
		}
		if logs := tb.logs.String(); strings.Contains(logs, "203.0.113") {
			t.Fatalf("logs name a client address:\n%s", logs)
		}
	})
}

// TestPublicTenantRateLimit: a tenant's budget is shared by all its clients and by no other tenant.
func TestPublicTenantRateLimit(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Public.TenantRate = ratelimit.Rate{Events: 3, Per: time.Minute, Burst: 3}
		c.Public.Now = clk.Now
	})
	for i := range 3 {
		if r := tb.intake(t, "acme", nil, submission); r.status != http.StatusAccepted {
			t.Fatalf("request %d = %d", i, r.status)
		}
	}
	r := tb.intake(t, "acme", nil, submission)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "20" {
		t.Fatalf("over the tenant's limit = %d Retry-After=%q", r.status, r.header.Get("Retry-After"))
	}
	if r := tb.intake(t, "globex", nil, submission); r.status != http.StatusAccepted {
		t.Fatalf("another tenant = %d %s", r.status, r.raw)
	}
}

// TestHoneypot: a submission that fills the hidden website field gets a receipt of the real format
// (the same one on a retry with its key), the validation errors a real one would get, and records
// nothing.
func TestHoneypot(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	real := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "real"}, submission)
	before := tb.logLen(t)
	bot := strings.Replace(submission, `"category":"billing"`, `"category":"billing","website":"http://spam.example"`, 1)
	first := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "bot-1"}, bot)
	again := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "bot-1"}, bot)
	keyless := tb.intake(t, "acme", nil, bot)
	for _, r := range []resp{real, first, again, keyless} {
		if r.status != http.StatusAccepted || r.body["status"] != "received" || !receiptRE.MatchString(r.body["receipt"].(string)) || len(r.body) != 2 {
			t.Fatalf("answer = %d %s", r.status, r.raw)
		}
	}
	if first.body["receipt"] != again.body["receipt"] {
		t.Fatalf("decoy receipts differ for one key: %s, %s", first.raw, again.raw)
	}
	// A key reused with another body: the answer a real intake gets, field for field.
	realReuse := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "real"}, strings.Replace(submission, "42", "43", 1))
	botReuse := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "bot-1"}, strings.Replace(bot, "42", "43", 1))
	shape := func(r resp) string {
		e, _ := r.body["error"].(map[string]any)
		return fmt.Sprint(r.status, " ", e["code"], " ", e["message"], " ", len(e), " ", r.header.Get("Content-Type"))
	}
	if shape(realReuse) != shape(botReuse) || realReuse.status != http.StatusUnprocessableEntity {
		t.Fatalf("key reuse: real %s, honeypot %s", realReuse.raw, botReuse.raw)
	}
	if r := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "bot-1"}, bot); r.body["receipt"] != first.body["receipt"] {
		t.Fatalf("the first body after a refused reuse = %s", r.raw)
	}
	badBot := `{"email":"not-an-address","subject":"s","message":"m","website":"x"}`
	if r := tb.intake(t, "acme", nil, badBot); r.status != http.StatusUnprocessableEntity || r.code() != "validation_failed" {
		t.Fatalf("invalid honeypot submission = %d %s, want the real 422", r.status, r.raw)
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("honeypot submissions appended %d events", n-before)
	}
	if !strings.Contains(tb.logs.String(), `"reason":"honeypot"`) {
		t.Fatal("honeypot drop not logged")
	}
}

// TestOriginPolicy: browsers may submit from the tenant's own page, from its trusted origins, and
// non-browser clients (no Origin, no Sec-Fetch-Site) always; a foreign origin is refused, and one
// tenant's trusted origins mean nothing to another.
func TestOriginPolicy(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	if _, err := tb.app.Tenancy.SetOrigins(t.Context(), "acme", []string{"https://acme.example"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.app.Tenancy.SetOrigins(t.Context(), "globex", []string{"https://globex.example"}); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(tb.srv.URL, "http://")
	tests := []struct {
		name    string
		slug    string
		headers map[string]string
		status  int
	}{
		{"non-browser client", "acme", nil, 202},
		{"same origin", "acme", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": tb.srv.URL}, 202},
		{"trusted origin", "acme", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://acme.example"}, 202},
		{"foreign origin", "acme", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403},
		{"same-site other origin", "acme", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://forms.acme.example"}, 403},
		{"other tenant's origin", "acme", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://globex.example"}, 403},
		{"old browser, foreign origin", "acme", map[string]string{"Origin": "https://evil.example"}, 403},
		{"old browser, same host", "acme", map[string]string{"Origin": "http://" + host}, 202},
		{"other tenant's own origin", "globex", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://globex.example"}, 202},
	}
	for _, tt := range tests {
		r := tb.intake(t, tt.slug, tt.headers, submission)
		if r.status != tt.status || (tt.status == 403 && r.code() != "cross_origin") {
			t.Errorf("%s: = %d %s, want %d", tt.name, r.status, r.raw, tt.status)
		}
	}
}

// TestIntakeNormalization: fields are stored in NFC with control characters removed; only the
// message keeps line breaks (CRLF becomes LF) and tabs; per-field limits count characters.
func TestIntakeNormalization(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) { c.Public = unlimited; c.Public.Fields.Subject = 13 })
	body := `{"name":"  Ade\u0301la\u0000 Nova\u202e ","email":" adela@example.com\r\n","subject":"Line1\r\nLine2\t!",` +
		`"message":"Hello\r\nworld\t!\u0007\u001b[31m\rend\u2028x","category":"billing"}`
	r := tb.intake(t, "acme", map[string]string{"Idempotency-Key": "norm"}, body)
	if r.status != http.StatusAccepted {
		t.Fatalf("intake = %d %s", r.status, r.raw)
	}
	l := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.admin, nil, "")
	id := l.body["items"].([]any)[0].(map[string]any)["id"].(string)
	d := tb.do(t, "GET", "/v1/inquiries/"+id, tb.admin, nil, "")
	req := d.body["requester"].(map[string]any)
	want := map[string]string{"name": "Adéla Nova", "email": "adela@example.com", "subject": "Line1 Line2 !", "message": "Hello\nworld\t![31m\nend\nx"}
	got := map[string]string{"name": req["name"].(string), "email": req["email"].(string), "subject": d.body["subject"].(string), "message": d.body["message"].(string)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got["name"] != "Ad\u00e9la Nova" {
		t.Errorf("name is not NFC: %+q", got["name"])
	}
	// "Ade\u0301la" is 6 code points but 5 characters after NFC: the limit counts the NFC form.
	long := tb.intake(t, "acme", nil, `{"email":"a@b.co","subject":"Ade\u0301la Ade\u0301la!!","message":"m"}`)
	if long.status != http.StatusAccepted {
		t.Fatalf("13 characters after NFC = %d %s", long.status, long.raw)
	}
	tooLong := tb.intake(t, "acme", nil, `{"email":"a@b.co","subject":"`+strings.Repeat("x", 14)+`","message":"m"}`)
	if tooLong.status != http.StatusUnprocessableEntity || tooLong.body["error"].(map[string]any)["field"] != "subject" {
		t.Fatalf("14 characters = %d %s", tooLong.status, tooLong.raw)
	}
}
