package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/casebook/casebook/internal/ratelimit"
)

// TestSignInNextStaysOnSite: after sign-in the console follows next only to a same-origin path of
// its own; every spelling a browser could read as another host (protocol-relative, backslashes,
// tabs and line breaks it drops, percent-encoded slashes, absolute URLs, dot segments) lands on
// the inbox instead, both in the sign-in page's form and in the redirect.
func TestSignInNextStaysOnSite(t *testing.T) {
	t.Parallel()
	cfg := embedded(t)
	cfg.ConsoleSignInRate = ratelimit.Rate{Off: true}
	tb := setup(t, cfg)
	for _, tc := range []struct{ next, want string }{
		{"/console/inquiries/inq_1", "/console/inquiries/inq_1"},
		{"/console/inbox?status=new&q=a%20b", "/console/inbox?status=new&q=a%20b"},
		{"/inquiries/r/CB-ABC", "/inquiries/r/CB-ABC"},
		{"/console", "/console"},
		{"", "/console/inbox"},
		{"/\\evil.example", "/console/inbox"},
		{"//evil.example", "/console/inbox"},
		{"/\\\\evil.example", "/console/inbox"},
		{"%2F%2Fevil.example", "/console/inbox"},
		{"/%2F/evil.example", "/console/inbox"},
		{"/%2Fevil.example", "/console/inbox"},
		{"/%5Cevil.example", "/console/inbox"},
		{"/%255Cevil.example", "/console/inbox"},
		{"/%25255C%25255Cevil.example", "/console/inbox"},
		{"https://evil.example", "/console/inbox"},
		{"https:/evil.example", "/console/inbox"},
		{"javascript:alert(1)", "/console/inbox"},
		{"/\t/evil.example", "/console/inbox"},
		{"/\n/evil.example", "/console/inbox"},
		{"/\r\n/evil.example", "/console/inbox"},
		{"/%09/evil.example", "/console/inbox"},
		{"/console/\\..\\..\\evil.example", "/console/inbox"},
		{"/console/../..//evil.example", "/console/inbox"},
		{"/console/%2e%2e/%2e%2e//evil.example", "/console/inbox"},
		{"/console\x00", "/console/inbox"},
		{"/elsewhere", "/console/inbox"},
		{"/console%", "/console/inbox"},
	} {
		c := tb.client(t)
		p := c.get("/console/signin?next=" + url.QueryEscape(tc.next))
		m := regexp.MustCompile(`name="next" value="([^"]*)"`).FindStringSubmatch(p.body)
		if p.status != http.StatusOK || m == nil || html.UnescapeString(m[1]) != tc.want {
			t.Errorf("sign-in page for next %+q: %d, form next %v, want %q", tc.next, p.status, m, tc.want)
		}
		p = c.do("POST", "/console/signin", url.Values{"token": {tb.op}, "next": {tc.next}}, nil)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != tc.want {
			t.Errorf("sign in with next %+q: %d Location %q, want %q", tc.next, p.status, p.header.Get("Location"), tc.want)
		}
	}
}
