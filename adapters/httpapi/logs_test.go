package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/ratelimit"
)

// TestNoPersonalDataInLogsPublicAndRefused extends TestNoPersonalDataInLogs to the form route and to
// every kind of refusal (malformed, unknown field, too large, cross-origin, honeypot, unknown
// tenant, role, rate limit): the logs carry no requester data, no free text and no client address.
func TestNoPersonalDataInLogsPublicAndRefused(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Public.ClientRate = ratelimit.Rate{Events: 1, Per: time.Hour, Burst: 14}
		c.Public.Now = clk.Now
	})
	if _, err := tb.app.Tenancy.SetOrigins(t.Context(), "acme", []string{"https://acme.example"}); err != nil {
		t.Fatal(err)
	}
	const body = `{"name":"Grace Hopper","email":"grace@example.com","subject":"Compiler bug","message":"COBOL is on fire"}`
	form := url.Values{"name": {"Grace Hopper"}, "email": {"grace@example.com"}, "subject": {"Compiler bug"}, "message": {"COBOL is on fire"}}
	statuses := map[int]int{}
	_, id := tb.submit(t, "k")
	note := func(status int) { statuses[status]++ }

	note(tb.intake(t, "acme", map[string]string{"Idempotency-Key": "g1"}, body).status)
	s, _, _ := tb.postForm(t, "acme", form, nil)
	note(s)
	badForm := url.Values{"name": {"Grace Hopper"}, "email": {"grace-at-example"}, "subject": {"Compiler bug"}, "message": {"COBOL is on fire"}}
	s, _, _ = tb.postForm(t, "acme", badForm, nil)
	note(s)
	twice := url.Values{"email": {"grace@example.com", "hopper@example.com"}, "message": {"COBOL is on fire"}}
	s, _, _ = tb.postForm(t, "acme", twice, nil)
	note(s)
	for _, b := range []string{
		`{"tenant_id":"grace@example.com","subject":"Compiler bug"}`,
		`{"email":"grace@example.com","subject":"Compiler bug"`,
		`{"email":["grace@example.com"],"message":"COBOL is on fire"}`,
		`{"email":"grace@example.com","message":"COBOL is on fire ` + strings.Repeat("x", 70<<10) + `"}`,
		strings.Replace(body, `"message"`, `"website":"http://grace.example","message"`, 1),
	} {
		note(tb.intake(t, "acme", nil, b).status)
	}
	note(tb.intake(t, "acme", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, body).status)
	s, _, _ = tb.postForm(t, "acme", form, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	note(s)
	note(tb.intake(t, "nope", nil, body).status)
	for range 3 { // past the client's burst
		note(tb.intake(t, "acme", nil, body).status)
	}
	note(tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.viewer, nil, `{"body":"Grace Hopper called about COBOL"}`).status)
	note(tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.op, nil, `{"body":"Grace Hopper called about COBOL"}`).status)
	note(tb.do(t, "POST", "/v1/inquiries/"+id+"/transitions", tb.op, map[string]string{"If-Match": `"1"`}, `{"to":"cancelled","reason":"Grace Hopper withdrew"}`).status)

	for _, want := range []int{202, 400, 403, 404, 413, 422, 429} {
		if statuses[want] == 0 {
			t.Errorf("no %d answer seen; the test would pass vacuously (%v)", want, statuses)
		}
	}
	logs := tb.logs.String()
	for _, want := range []string{`"reason":"honeypot"`, `"reason":"cross_origin"`, `"reason":"client_rate_limit"`, `"route":"/f/{tenant_slug}"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s", want)
		}
	}
	for _, secret := range []string{"Grace", "Hopper", "grace@", "grace-at-example", "hopper@", "Compiler bug", "COBOL", "withdrew", "127.0.0.1", tb.op, tb.viewer} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
}
