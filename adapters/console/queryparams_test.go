package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/console"
)

// TestEveryPageRefusesUnknownQuery walks every route of the console's router: signed in, a request
// with a query parameter the route does not take is 400 naming it, and so is a parameter it takes
// given twice; a new route cannot forget the check, which runs before its page.
func TestEveryPageRefusesUnknownQuery(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	c := tb.client(t)
	csrf := c.signIn(tb.admin)
	vars := strings.NewReplacer("{id}", "inq_x", "{action}", "claim", "{area}", "projections", "{op}", "retry", "{receipt}", "CB-X")
	n := 0
	err := tb.app.Console.WalkRoutesForTest(func(tpl string, methods []string) {
		for _, m := range methods {
			n++
			path := vars.Replace(tpl)
			var form url.Values
			if m == http.MethodPost {
				form = url.Values{"csrf": {csrf}}
			}
			p := c.do(m, path+"?zz_unknown=1", form, nil)
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, "zz_unknown") {
				t.Errorf("%s %s?zz_unknown=1 = %d, want 400 naming the parameter", m, tpl, p.status)
			}
			if takes := console.PageParams(m, tpl); len(takes) > 0 {
				p := c.do(m, path+"?"+takes[0]+"=a&"+takes[0]+"=b", form, nil)
				if p.status != http.StatusBadRequest || !strings.Contains(p.body, "more than once") {
					t.Errorf("%s %s with %s twice = %d, want 400", m, tpl, takes[0], p.status)
				}
			}
		}
	})
	if err != nil || n < 10 {
		t.Fatalf("walked %d routes: %v", n, err)
	}
}
