package httpapi_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/tenancy"
)

// postForm submits a urlencoded form to /f/{slug} and returns the HTML answer.
func (tb *testBundle) postForm(t *testing.T, slug string, vals url.Values, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tb.srv.URL+"/f/"+slug, strings.NewReader(vals.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

var receiptInPage = regexp.MustCompile(`<strong id="receipt">(CB-[A-Z2-7]{16})</strong>`)

func formValues(key string) url.Values {
	return url.Values{"name": {"Ada Lovelace"}, "email": {"ada@example.com"}, "subject": {"Invoice wrong"},
		"message": {"My invoice 42 is wrong\r\nTwice."}, "idempotency_key": {key}}
}

// TestFormPage: the form renders per tenant with a fresh idempotency key, the honeypot and a strict
// Content-Security-Policy; an unknown tenant is a 404 page.
func TestFormPage(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	get := func(path string) (int, http.Header, string) {
		res, err := http.Get(tb.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	status, h, page := get("/f/acme")
	if status != 200 || h.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("form = %d %v", status, h)
	}
	for _, want := range []string{`action="/f/acme"`, `name="website"`, `name="idempotency_key" value="form-`, `<textarea id="message"`} {
		if !strings.Contains(page, want) {
			t.Errorf("form lacks %q", want)
		}
	}
	_, _, again := get("/f/acme")
	key := regexp.MustCompile(`value="(form-[0-9a-f]+)"`)
	if key.FindStringSubmatch(page)[1] == key.FindStringSubmatch(again)[1] {
		t.Error("two renders share an idempotency key")
	}
	if status, _, page := get("/f/nope"); status != 404 || !strings.Contains(page, "does not exist") {
		t.Fatalf("unknown tenant = %d %s", status, page)
	}
}

// TestFormSubmit: a form post records the inquiry (CRLF normalized) and renders the receipt; a
// resubmission answers the same receipt; invalid input re-renders the form, escaped; the form shares
// the JSON route's refusals.
func TestFormSubmit(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	status, h, page := tb.postForm(t, "acme", formValues("form-1"), nil)
	m := receiptInPage.FindStringSubmatch(page)
	if status != http.StatusAccepted || m == nil || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("submit = %d %s", status, page)
	}
	if _, _, again := tb.postForm(t, "acme", formValues("form-1"), nil); !strings.Contains(again, m[1]) {
		t.Fatalf("resubmission answered another receipt: %s", again)
	}
	l := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.admin, nil, "")
	items := l.body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["receipt"] != m[1] {
		t.Fatalf("listed = %s", l.raw)
	}
	d := tb.do(t, "GET", "/v1/inquiries/"+items[0].(map[string]any)["id"].(string), tb.admin, nil, "")
	if d.body["message"] != "My invoice 42 is wrong\nTwice." || d.body["source"] != "public_form" {
		t.Fatalf("stored = %s", d.raw)
	}

	bad := formValues("form-2")
	bad.Set("name", `<script>alert("x")</script>`)
	bad.Set("email", "not-an-address")
	status, _, page = tb.postForm(t, "acme", bad, nil)
	if status != http.StatusUnprocessableEntity || !strings.Contains(page, "Please check the email field") ||
		strings.Contains(page, "<script>") || !strings.Contains(page, "&lt;script&gt;") || !strings.Contains(page, `value="form-2"`) {
		t.Fatalf("invalid submission = %d %s", status, page)
	}

	before := tb.logLen(t)
	bot := formValues("form-3")
	bot.Set("website", "http://spam.example")
	if status, _, page := tb.postForm(t, "acme", bot, nil); status != http.StatusAccepted || receiptInPage.FindStringSubmatch(page) == nil {
		t.Fatalf("honeypot = %d %s", status, page)
	}
	if tb.logLen(t) != before {
		t.Fatal("the honeypot submission was recorded")
	}

	unknown := formValues("form-4")
	unknown.Set("tenant_id", "x")
	twice := formValues("form-5")
	twice.Add("email", "b@example.com")
	tests := []struct {
		name    string
		vals    url.Values
		headers map[string]string
		status  int
	}{
		{"unknown field", unknown, nil, 400},
		{"repeated field", twice, nil, 400},
		{"json body", formValues("form-6"), map[string]string{"Content-Type": "application/json"}, 415},
		{"foreign origin", formValues("form-7"), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403},
		{"same origin", formValues("form-8"), map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": tb.srv.URL}, 202},
		{"too large", url.Values{"message": {strings.Repeat("x", 70<<10)}}, nil, 413},
	}
	for _, tt := range tests {
		status, h, page := tb.postForm(t, "acme", tt.vals, tt.headers)
		if status != tt.status || h.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s = %d %s, want %d", tt.name, status, page, tt.status)
		}
	}
	if status, _, _ := tb.postForm(t, "nope", formValues("form-9"), nil); status != 404 {
		t.Errorf("unknown tenant = %d", status)
	}
}

// TestFormRateLimit: the form and the JSON route draw on one per-client budget.
func TestFormRateLimit(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Public.ClientRate = ratelimit.Rate{Events: 1, Per: time.Minute, Burst: 2}
		c.Public.Now = clk.Now
	})
	if r := tb.intake(t, "acme", nil, submission); r.status != 202 {
		t.Fatal(r.raw)
	}
	if status, _, page := tb.postForm(t, "acme", formValues("f1"), nil); status != 202 {
		t.Fatal(page)
	}
	status, h, page := tb.postForm(t, "acme", formValues("f2"), nil)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "60" || !strings.Contains(page, "Too many submissions") {
		t.Fatalf("third submission = %d Retry-After=%q %s", status, h.Get("Retry-After"), page)
	}
}

// TestFormNameCategoriesAndRetryAfter: the form shows the tenant's display name and a select of its
// categories, refuses a category not on the list keeping what was typed, and on 429 keeps the
// input and says how long Retry-After asks to wait.
func TestFormNameCategoriesAndRetryAfter(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Public.ClientRate = ratelimit.Rate{Events: 1, Per: time.Minute, Burst: 2}
		c.Public.Now = clk.Now
	})
	name := "Acme & Co"
	if _, err := tb.app.Tenancy.SetProfile(t.Context(), "acme", &name, []tenancy.Category{{Slug: "billing", Label: "Billing"},
		{Slug: "shipping", Label: "Shipping & returns"}}); err != nil {
		t.Fatal(err)
	}
	r := tb.do(t, "GET", "/f/acme", "", nil, "")
	for _, want := range []string{"<title>Contact Acme &amp; Co</title>", `<select id="category" name="category" required>`,
		`<option value="shipping">Shipping &amp; returns</option>`} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("form page lacks %q", want)
		}
	}
	vals := formValues("f1")
	vals.Set("category", "legal")
	status, _, page := tb.postForm(t, "acme", vals, nil)
	if status != http.StatusUnprocessableEntity || !strings.Contains(page, "category field") || !strings.Contains(page, `value="Invoice wrong"`) {
		t.Fatalf("unknown category = %d %s", status, page)
	}
	if n := tb.logLen(t); n != 0 {
		t.Fatalf("a refused category appended %d events", n)
	}
	vals.Set("category", "shipping")
	if status, _, page := tb.postForm(t, "acme", vals, nil); status != http.StatusAccepted {
		t.Fatalf("listed category = %d %s", status, page)
	}
	vals = formValues("f2")
	vals.Set("category", "billing")
	status, h, page := tb.postForm(t, "acme", vals, nil)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "60" || !strings.Contains(page, "Please wait 60 seconds") ||
		!strings.Contains(page, `value="Invoice wrong"`) || !strings.Contains(page, `name="category" value="billing"`) {
		t.Fatalf("rate limited = %d Retry-After=%q %s", status, h.Get("Retry-After"), page)
	}
}
