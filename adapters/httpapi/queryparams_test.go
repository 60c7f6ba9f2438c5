package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/httpapi"
)

// TestEveryRouteRefusesUnknownQuery walks every route of a fully wired server (API, portal,
// public intake and form, admin, Slack, metrics, and the console's) and sends each method, with an
// admin's token, a query parameter the route does not take: every answer is 400 naming it, so a
// new route cannot forget the check. Each parameter openapi.json documents for a GET route passes
// the check (whatever the handler then says of its value).
func TestEveryRouteRefusesUnknownQuery(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	vars := strings.NewReplacer("{id}", "x", "{job_id}", "x", "{attachment_id}", "x", "{name}", "querymodel",
		"{tenant_slug}", "acme", "{receipt}", "CB-X", "{token}", "x")
	n := 0
	err := httpapi.WalkAllRoutes(func(tpl string, methods []string) {
		for _, m := range methods {
			n++
			path := vars.Replace(tpl)
			r := tb.do(t, m, path+"?zz_unknown=1", tb.admin, nil, "")
			if r.status != http.StatusBadRequest || !strings.Contains(r.raw, "zz_unknown") {
				t.Errorf("%s %s?zz_unknown=1 = %d %.200s, want 400 naming the parameter", m, tpl, r.status, r.raw)
				continue
			}
			if strings.HasPrefix(tpl, "/console") || strings.HasPrefix(tpl, "/inquiries/r/") {
				continue // the console's own page (TestEveryPageRefusesUnknownQuery)
			}
			if r.code() != "bad_request" || !strings.Contains(r.raw, `unknown query parameter \"zz_unknown\"`) {
				t.Errorf("%s %s: %s, want bad_request naming the unknown parameter", m, tpl, r.raw)
			}
			if m != http.MethodGet {
				continue
			}
			for _, p := range httpapi.QueryParams(m, tpl) {
				if r := tb.do(t, m, path+"?"+p+"=x", tb.admin, nil, ""); strings.Contains(r.raw, "query parameter") {
					t.Errorf("%s %s?%s=x: %s; the documented parameter must pass", m, tpl, p, r.raw)
				}
				if r := tb.do(t, m, path+"?"+p+"=x&"+p+"=y", tb.admin, nil, ""); r.status != http.StatusBadRequest ||
					!strings.Contains(r.raw, "given more than once") {
					t.Errorf("%s %s with %s twice = %d %s, want 400", m, tpl, p, r.status, r.raw)
				}
			}
		}
	})
	if err != nil || n < 50 {
		t.Fatalf("walked %d routes: %v", n, err)
	}
}
