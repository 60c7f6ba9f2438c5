package console_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// TestMailtoOnlyForPlainAddresses: the inquiry page links a requester's address with mailto: only
// when it is a plain address, percent-encoded; an address with "?", "&", "%" or "#" (legal in a
// local part, but "?" would add cc, bcc or body fields to the mail) is shown as text, unlinked.
func TestMailtoOnlyForPlainAddresses(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	c := tb.client(t)
	c.signIn(tb.op)
	for i, tc := range []struct{ email, href string }{
		{"ada@example.com", "mailto:ada@example.com"},
		{"o'brien+tag@example.com", "mailto:o%27brien+tag@example.com"},
		{"a/b{c}@example.com", "mailto:a%2Fb%7Bc%7D@example.com"},
		{"a=b@example.com", "mailto:a%3Db@example.com"},
		{"a?cc=x@evil.example", ""},
		{"a?bcc=x&body=hi@example.com", ""},
		{"a&cc=x@example.com", ""},
		{"a%0Abcc=x@example.com", ""},
		{"a%3Fcc=x@example.com", ""},
	} {
		res, err := tb.app.Commands.Intake(t.Context(), commands.Intake{Tenant: tb.acme, Source: domain.SourcePublicForm,
			IdempotencyKey: "mail-" + string(rune('a'+i)), Requester: domain.Requester{Name: "Ada", Email: tc.email},
			Subject: "Invoice", Message: "Wrong total"})
		if err != nil {
			t.Fatalf("intake with %q: %v", tc.email, err)
		}
		tb.catchUp(t)
		p := c.get("/console/inquiries/" + string(res.InquiryID))
		m := regexp.MustCompile(`<dd id="email">(.*?)</dd>`).FindStringSubmatch(p.body)
		if p.status != http.StatusOK || m == nil {
			t.Fatalf("page for %q: %d", tc.email, p.status)
		}
		dd := m[1]
		if tc.href == "" {
			if strings.Contains(dd, "<a") || strings.Contains(dd, "mailto:") || html.UnescapeString(dd) != tc.email {
				t.Errorf("address %q rendered as %q, want the text alone", tc.email, dd)
			}
			continue
		}
		link := regexp.MustCompile(`^<a href="([^"]*)">(.*)</a>$`).FindStringSubmatch(dd)
		if link == nil || html.UnescapeString(link[1]) != tc.href || html.UnescapeString(link[2]) != tc.email {
			t.Errorf("address %q rendered as %q, want a link to %s", tc.email, dd, tc.href)
		}
	}
}
