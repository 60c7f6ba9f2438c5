package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/clientaddr"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/projections/querymodel"
	"github.com/casebook/casebook/queries"
	"github.com/casebook/casebook/tenancy"
)

type testBundle struct {
	app            *app.App
	srv            *httptest.Server
	admin, op, op2 string
	viewer, other  string
	acme, globex   domain.TenantID
	opP, op2P      domain.Principal
	logs           *bytes.Buffer
	mu             *sync.Mutex
}

// setup runs the whole application (subscribers and the HTTP handler) on cfg's storage, with two
// tenants: acme (admin, operators Olga and Bob of team support, viewer Vic) and globex.
func setup(t *testing.T, cfg app.Config) *testBundle {
	t.Helper()
	ctx := t.Context()
	tb := &testBundle{logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
	cfg.Logger = slog.New(slog.NewJSONHandler(lockedWriter{tb}, nil))
	cfg.Public.ClientRate, cfg.Public.TenantRate = ratelimit.Rate{Off: true}, ratelimit.Rate{Off: true}
	a := apptest.Open(t, cfg)
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range a.Runners {
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Console.Close(); cancel(); wg.Wait() })
	tb.app, tb.srv = a, srv
	var err error
	acme, _, admin, err := a.Tenancy.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	tb.acme, tb.admin = acme.ID, admin
	if tb.opP, tb.op, err = a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support"); err != nil {
		t.Fatal(err)
	}
	if tb.op2P, tb.op2, err = a.Tenancy.CreatePrincipal(ctx, "acme", "Bob", domain.RoleOperator, "support"); err != nil {
		t.Fatal(err)
	}
	if _, tb.viewer, err = a.Tenancy.CreatePrincipal(ctx, "acme", "Vic", domain.RoleViewer, "support"); err != nil {
		t.Fatal(err)
	}
	globex, _, other, err := a.Tenancy.CreateTenant(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	tb.globex, tb.other = globex.ID, other
	return tb
}

type lockedWriter struct{ tb *testBundle }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.tb.mu.Lock()
	defer w.tb.mu.Unlock()
	return w.tb.logs.Write(p)
}

// browserClient is a cookie-keeping client that does not follow redirects, like a browser tab
// whose every step the test inspects.
type browserClient struct {
	t   *testing.T
	tb  *testBundle
	hc  *http.Client
	jar *cookiejar.Jar
}

func (tb *testBundle) client(t *testing.T) *browserClient {
	jar, _ := cookiejar.New(nil)
	return &browserClient{t: t, tb: tb, jar: jar, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (c *browserClient) do(method, path string, form url.Values, headers map[string]string) page {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.tb.srv.URL+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, header: res.Header, body: string(b)}
}

func (c *browserClient) get(path string) page { c.t.Helper(); return c.do("GET", path, nil, nil) }

// signIn signs in with token and returns the session's CSRF token (read from a page's form).
func (c *browserClient) signIn(token string) string {
	c.t.Helper()
	p := c.do("POST", "/console/signin", url.Values{"token": {token}}, nil)
	if p.status != http.StatusSeeOther {
		c.t.Fatalf("sign in: %d %s", p.status, p.body)
	}
	return c.csrf()
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *browserClient) csrf() string {
	c.t.Helper()
	p := c.get("/console/inbox")
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		c.t.Fatalf("no csrf token on the inbox (%d): %s", p.status, p.body)
	}
	return m[1]
}

func (tb *testBundle) logLen(t *testing.T) int { t.Helper(); return apptest.LogLen(t, tb.app) }

// intake records an inquiry for tenant and waits until the query model shows it.
func (tb *testBundle) intake(t *testing.T, tenant domain.TenantID, key string) (domain.InquiryID, string) {
	t.Helper()
	id := apptest.Intake(t, tb.app, tenant, key)
	tb.catchUp(t)
	q, err := tb.app.Reader.Get(t.Context(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, q.Receipt
}

func embedded(t *testing.T) app.Config { return apptest.Backends[0].Config(t) }

// TestSignInCookieAndSignOut: sign-in makes an HttpOnly, SameSite=Lax session cookie with an
// expiry (Secure, __Host- prefixed, when served as https); a bad token is refused; sign-out and a
// revoked token both end the session.
func TestSignInCookieAndSignOut(t *testing.T) {
	t.Parallel()
	for _, b := range apptest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, b.Config(t))
			c := tb.client(t)
			p := c.get("/console/inbox")
			if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/signin?next=%2Fconsole%2Finbox" {
				t.Fatalf("signed out inbox: %d %q", p.status, p.header.Get("Location"))
			}
			p = c.do("POST", "/console/signin", url.Values{"token": {"cb_not-a-token"}}, nil)
			if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not valid") {
				t.Fatalf("bad token: %d %s", p.status, p.body)
			}
			p = c.do("POST", "/console/signin", url.Values{"token": {tb.op}, "next": {"https://evil.example/"}}, nil)
			if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/inbox" {
				t.Fatalf("sign in: %d %q (an off-site next must not be followed)", p.status, p.header.Get("Location"))
			}
			ck := p.header.Get("Set-Cookie")
			for _, want := range []string{"casebook_session=cs_", "Path=/", "HttpOnly", "SameSite=Lax", "Expires="} {
				if !strings.Contains(ck, want) {
					t.Errorf("cookie %q lacks %q", ck, want)
				}
			}
			if strings.Contains(ck, "Secure") || strings.Contains(ck, tb.op) {
				t.Errorf("plain-http cookie %q: Secure set, or the token itself in it", ck)
			}
			if p := c.get("/console/inbox"); p.status != http.StatusOK || !strings.Contains(p.body, "Olga") {
				t.Fatalf("inbox after sign-in: %d", p.status)
			}
			csrf := c.csrf()
			if p := c.do("POST", "/console/signout", url.Values{"csrf": {csrf}}, nil); p.status != http.StatusSeeOther ||
				!strings.Contains(p.header.Get("Set-Cookie"), "Max-Age=0") {
				t.Fatalf("sign out: %d %q", p.status, p.header.Get("Set-Cookie"))
			}
			// The old cookie value no longer works even if a browser kept it.
			old := regexp.MustCompile(`casebook_session=([^;]+)`).FindStringSubmatch(ck)[1]
			if p := c.do("GET", "/console/inbox", nil, map[string]string{"Cookie": "casebook_session=" + old}); p.status != http.StatusSeeOther {
				t.Fatalf("ended session still serves: %d", p.status)
			}

			c2 := tb.client(t)
			c2.signIn(tb.op2)
			if _, err := tb.app.Tenancy.RevokePrincipalTokens(t.Context(), "acme", tb.op2P.ID); err != nil {
				t.Fatal(err)
			}
			if p := c2.get("/console/inbox"); p.status != http.StatusSeeOther {
				t.Fatalf("session of a revoked token still serves: %d", p.status)
			}
		})
	}
}

// TestSecureCookieBehindTLS: a console configured with an https public URL marks its cookie
// Secure with the __Host- prefix.
func TestSecureCookieBehindTLS(t *testing.T) {
	t.Parallel()
	cfg := embedded(t)
	cfg.PublicURL = "https://casebook.example"
	tb := setup(t, cfg)
	p := tb.client(t).do("POST", "/console/signin", url.Values{"token": {tb.op}}, nil)
	ck := p.header.Get("Set-Cookie")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(ck, "__Host-casebook_session=") || !strings.Contains(ck, "Secure") {
		t.Fatalf("cookie behind TLS: %d %q", p.status, ck)
	}
}

// TestConsoleCSRF: a form post without the session's token, with another token, or reported by
// the browser as cross-site is refused, and nothing is appended.
func TestConsoleCSRF(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "k1")
	c := tb.client(t)
	csrf := c.signIn(tb.op)
	before := tb.logLen(t)
	claim := "/console/inquiries/" + string(id) + "/claim"
	for name, tc := range map[string]struct {
		form    url.Values
		headers map[string]string
	}{
		"no token":    {url.Values{"version": {"1"}}, nil},
		"other token": {url.Values{"version": {"1"}, "csrf": {"x" + csrf}}, nil},
		"cross-site":  {url.Values{"version": {"1"}, "csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"foreign origin": {url.Values{"version": {"1"}, "csrf": {csrf}}, map[string]string{"Origin": "https://evil.example",
			"Sec-Fetch-Site": ""}},
	} {
		if p := c.do("POST", claim, tc.form, tc.headers); p.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, p.status)
		}
	}
	if p := c.do("POST", "/console/signout", url.Values{}, nil); p.status != http.StatusForbidden {
		t.Errorf("sign-out without token: %d", p.status)
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("refused posts appended %d events", n-before)
	}
	if p := c.do("POST", claim, url.Values{"version": {"1"}, "csrf": {csrf}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("claim with the token: %d %s", p.status, p.body)
	}
}

// TestConsoleCrossTenant: another tenant's inquiry is not found by id, by receipt link or by an
// action, exactly like an unknown one, and nothing changes.
func TestConsoleCrossTenant(t *testing.T) {
	t.Parallel()
	for _, b := range apptest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, b.Config(t))
			gid, greceipt := tb.intake(t, tb.globex, "g1")
			c := tb.client(t)
			csrf := c.signIn(tb.admin)
			before := tb.logLen(t)
			for _, path := range []string{"/console/inquiries/" + string(gid), "/inquiries/r/" + greceipt, "/console/inquiries/unknown-id"} {
				if p := c.get(path); p.status != http.StatusNotFound {
					t.Errorf("GET %s: %d, want 404", path, p.status)
				}
			}
			if p := c.get("/console/inbox?q=" + greceipt); p.status != http.StatusOK || strings.Contains(p.body, greceipt+"</a>") {
				t.Errorf("inbox search found another tenant's receipt: %d", p.status)
			}
			for _, a := range []string{"claim", "note"} {
				p := c.do("POST", "/console/inquiries/"+string(gid)+"/"+a, url.Values{"csrf": {csrf}, "version": {"1"}, "body": {"x"}}, nil)
				if p.status != http.StatusNotFound {
					t.Errorf("POST %s on another tenant's inquiry: %d, want 404", a, p.status)
				}
			}
			if n := tb.logLen(t); n != before {
				t.Fatalf("cross-tenant posts appended %d events", n-before)
			}
		})
	}
}

// TestConsoleRoleRefusals: a viewer reads but cannot act; operators and viewers get 403 on admin
// pages and actions; refusals are audited like the API's.
func TestConsoleRoleRefusals(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "k1")
	v := tb.client(t)
	vcsrf := v.signIn(tb.viewer)
	if p := v.get("/console/inquiries/" + string(id)); p.status != http.StatusOK || strings.Contains(p.body, `id="claim"`) {
		t.Fatalf("viewer's inquiry page: %d (claim offered: %v)", p.status, strings.Contains(p.body, `id="claim"`))
	}
	before := tb.logLen(t)
	if p := v.do("POST", "/console/inquiries/"+string(id)+"/claim", url.Values{"csrf": {vcsrf}, "version": {"1"}}, nil); p.status != http.StatusForbidden {
		t.Fatalf("viewer claim: %d", p.status)
	}
	if tb.logLen(t) != before {
		t.Fatal("a refused claim appended")
	}
	rows, err := tb.app.DB.QueryContext(t.Context(), `SELECT outcome, code FROM command_audit WHERE command = 'claim'`)
	if err != nil {
		t.Fatal(err)
	}
	var outcome, code string
	for rows.Next() {
		_ = rows.Scan(&outcome, &code)
	}
	rows.Close()
	if outcome != "refused" || code != "forbidden" {
		t.Fatalf("audit of the viewer's claim: %q %q", outcome, code)
	}
	o := tb.client(t)
	ocsrf := o.signIn(tb.op)
	for _, c := range []struct {
		cl   *browserClient
		csrf string
	}{{v, vcsrf}, {o, ocsrf}} {
		if p := c.cl.get("/console/admin"); p.status != http.StatusForbidden {
			t.Errorf("admin page for a non-admin: %d", p.status)
		}
		if p := c.cl.do("POST", "/console/admin/tokens/revoke", url.Values{"csrf": {c.csrf}, "token_id": {"tok_x"}, "reason": {"r"}}, nil); p.status != http.StatusForbidden {
			t.Errorf("admin action for a non-admin: %d", p.status)
		}
	}
	if p := o.get("/console/inbox"); strings.Contains(p.body, `href="/console/admin"`) {
		t.Error("the operator's navigation offers Admin")
	}
}

// TestReceiptLinkAfterSignIn: the Slack link /inquiries/r/{receipt} sends a signed-out browser to
// sign in and then lands on the inquiry; without a session no lookup happens.
func TestReceiptLinkAfterSignIn(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, receipt := tb.intake(t, tb.acme, "k1")
	c := tb.client(t)
	p := c.get("/inquiries/r/" + receipt)
	next := "/inquiries/r/" + receipt
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/signin?next="+url.QueryEscape(next) {
		t.Fatalf("signed-out receipt link: %d %q", p.status, p.header.Get("Location"))
	}
	if p := c.get("/inquiries/r/CB-NOSUCHRECEIPT"); p.status != http.StatusSeeOther {
		t.Fatalf("signed-out unknown receipt: %d (must not reveal whether it exists)", p.status)
	}
	p = c.do("POST", "/console/signin", url.Values{"token": {tb.op}, "next": {next}}, nil)
	if p.header.Get("Location") != next {
		t.Fatalf("sign-in goes to %q, want %q", p.header.Get("Location"), next)
	}
	p = c.get(next)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/inquiries/"+string(id) {
		t.Fatalf("receipt link: %d %q", p.status, p.header.Get("Location"))
	}
	if p := c.get("/console/inquiries/" + string(id)); p.status != http.StatusOK || !strings.Contains(p.body, receipt) ||
		!strings.Contains(p.body, "ada@example.com") {
		t.Fatalf("inquiry page: %d", p.status)
	}
}

// TestStaleFormGets412: two operators open the same inquiry; the second one's form, carrying the
// version it was rendered with, is refused with 412 and says who changed it; nothing is appended.
func TestStaleFormGets412(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "k1")
	olga, bob := tb.client(t), tb.client(t)
	ocsrf, bcsrf := olga.signIn(tb.op), bob.signIn(tb.op2)
	path := "/console/inquiries/" + string(id)
	if p := olga.do("POST", path+"/claim", url.Values{"csrf": {ocsrf}, "version": {"1"}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("olga claims: %d %s", p.status, p.body)
	}
	before := tb.logLen(t)
	p := bob.do("POST", path+"/transition", url.Values{"csrf": {bcsrf}, "version": {"1"}, "to": {"triaged"}, "reason": {"typed text"}}, nil)
	if p.status != http.StatusPreconditionFailed {
		t.Fatalf("stale transition: %d", p.status)
	}
	for _, want := range []string{`id="conflict"`, "changed by Olga", "reload", `value="typed text"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("412 page lacks %q", want)
		}
	}
	if tb.logLen(t) != before {
		t.Fatal("a stale form appended")
	}
}

// TestInboxFiltersAndCounts: the inbox refuses unknown parameters, finds by receipt and subject,
// shows counts per status, and pages with a cursor.
func TestInboxFiltersAndCounts(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	var receipts []string
	for i := range 27 {
		_, r := tb.intake(t, tb.acme, "k"+string(rune('a'+i)))
		receipts = append(receipts, r)
	}
	c := tb.client(t)
	c.signIn(tb.op)
	if p := c.get("/console/inbox?stauts=new"); p.status != http.StatusBadRequest {
		t.Fatalf("unknown parameter: %d", p.status)
	}
	p := c.get("/console/inbox?q=" + strings.ToLower(receipts[3]))
	if p.status != http.StatusOK || strings.Count(p.body, `class="receipt"`) != 1 || !strings.Contains(p.body, receipts[3]) {
		t.Fatalf("receipt search: %d, %d rows", p.status, strings.Count(p.body, `class="receipt"`))
	}
	first := c.get("/console/inbox?q=INVOICE")
	if strings.Count(first.body, `class="receipt"`) != 25 || !strings.Contains(first.body, `id="next"`) {
		t.Fatalf("subject search: %d rows, next link %v", strings.Count(first.body, `class="receipt"`), strings.Contains(first.body, `id="next"`))
	}
	if p := c.get("/console/inbox?q=nothing+like+this"); !strings.Contains(p.body, `id="empty"`) {
		t.Fatal("a search without matches shows rows")
	}
	if !regexp.MustCompile(`id="count-new">New <span class="n">27</span>`).MatchString(p.body) {
		t.Fatal("count of new inquiries is not 27")
	}
	next := regexp.MustCompile(`href="([^"]+)" id="next"`).FindStringSubmatch(first.body)[1]
	p2 := c.get(strings.ReplaceAll(next, "&amp;", "&"))
	if n := strings.Count(p2.body, `class="receipt"`); n != 2 {
		t.Fatalf("second page: %d rows, want 2", n)
	}
}

// catchUp waits until every subscriber (query model, schedules, Slack intents) has applied the
// whole log.
func (tb *testBundle) catchUp(t *testing.T) {
	t.Helper()
	head, err := tb.app.Store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30e9)
	defer cancel()
	for _, r := range tb.app.Runners {
		if err := r.WaitFor(ctx, head); err != nil {
			t.Fatalf("%s: %v", r.Projection.Name(), err)
		}
	}
}

// TestConsoleDueDatesAndFollowUps: an operator sets a due date, schedules and cancels a follow-up
// and adds a watcher from the inquiry page; the inbox filters by due date; an admin's review of a
// due job needs a reason and is audited.
func TestConsoleDueDatesAndFollowUps(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, receipt := tb.intake(t, tb.acme, "k1")
	tb.intake(t, tb.acme, "k2")
	c := tb.client(t)
	csrf := c.signIn(tb.op)
	path := "/console/inquiries/" + string(id)
	post := func(action string, form url.Values) page {
		t.Helper()
		p := c.get(path)
		v := regexp.MustCompile(`name="version" value="(\d+)"`).FindStringSubmatch(p.body)
		if v == nil {
			t.Fatalf("no version on the inquiry page: %s", p.body)
		}
		form.Set("csrf", csrf)
		form.Set("version", v[1])
		res := c.do("POST", path+"/"+action, form, nil)
		if res.status == http.StatusSeeOther {
			c.get(strings.TrimPrefix(res.header.Get("Location"), tb.srv.URL)) // read-your-writes: waits for the change
		}
		return res
	}
	due := time.Now().UTC().AddDate(0, 0, 30).Format("2006-01-02")
	if p := post("due", url.Values{"due_date": {due}, "due_time": {"09:30"}}); p.status != http.StatusSeeOther {
		t.Fatalf("set due date: %d %s", p.status, p.body)
	}
	if p := post("follow-up", url.Values{"in": {"4h"}, "note": {"call back"}}); p.status != http.StatusSeeOther {
		t.Fatalf("follow-up: %d %s", p.status, p.body)
	}
	if p := post("watchers", url.Values{"principal": {string(tb.op2P.ID)}}); p.status != http.StatusSeeOther {
		t.Fatalf("watcher: %d %s", p.status, p.body)
	}
	if p := post("follow-up", url.Values{"in": {"soon"}}); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "choose when") {
		t.Fatalf("a follow-up without a delay: %d", p.status)
	}
	tb.catchUp(t)
	p := c.get(path)
	for _, want := range []string{`<dd id="due-at">` + due + ` 09:30 UTC</dd>`, "Follow up", "Bob", `/cancel-follow-up"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("inquiry page lacks %q", want)
		}
	}
	job := regexp.MustCompile(`name="job_id" value="([^"]+)"`).FindStringSubmatch(p.body)
	if job == nil {
		t.Fatal("no pending follow-up to cancel")
	}
	if p := post("cancel-follow-up", url.Values{"job_id": {job[1]}}); p.status != http.StatusSeeOther {
		t.Fatalf("cancel follow-up: %d %s", p.status, p.body)
	}
	tb.catchUp(t)
	if p := c.get(path); strings.Contains(p.body, `name="job_id" value="`+job[1]+`"`) {
		t.Fatal("the cancelled follow-up is still offered")
	}

	// Due by that day finds the inquiry with that due date, not the other.
	p = c.get("/console/inbox?due_before=" + due)
	if n := strings.Count(p.body, `class="receipt"`); n != 1 || !strings.Contains(p.body, receipt) {
		t.Fatalf("due_before filter: %d rows", n)
	}
	if p := c.get("/console/inbox?breached=maybe"); p.status != http.StatusBadRequest {
		t.Fatalf("breached=maybe: %d", p.status)
	}

	// An admin review without a reason is refused and audited; with one, the job is reviewed.
	a := tb.client(t)
	acsrf := a.signIn(tb.admin)
	if p := a.do("POST", "/console/admin/due/cancel", url.Values{"csrf": {acsrf}, "id": {job[1]}, "reason": {" "}}, nil); p.status != http.StatusUnprocessableEntity {
		t.Fatalf("review without a reason: %d", p.status)
	}
	var n int
	if err := tb.app.DB.QueryRowContext(t.Context(), `SELECT count(*) FROM admin_audit WHERE action = 'due/cancel' AND outcome = 'refused'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("refused review audited %d times (%v)", n, err)
	}
}

// TestRedirectPositionIsSealed: the read-your-writes position an action's redirect carries is an
// opaque token for the session's tenant, never a raw log position (which would tell one tenant how
// much every tenant writes).
func TestRedirectPositionIsSealed(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "k1")
	c := tb.client(t)
	csrf := c.signIn(tb.op)
	p := c.do("POST", "/console/inquiries/"+string(id)+"/claim", url.Values{"version": {"1"}, "csrf": {csrf}}, nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("claim: %d %s", p.status, p.body)
	}
	loc, err := url.Parse(p.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	after := loc.Query().Get("after")
	if after == "" {
		t.Fatalf("redirect %q carries no position", loc)
	}
	if _, err := eventstore.ParsePosition(after); err == nil {
		t.Fatalf("redirect carries a raw log position %q", after)
	}
	con := tb.app.Console
	pos, err := con.OpenPositionForTest(tb.acme, after)
	if err != nil || pos == (eventstore.Position{}) {
		t.Fatalf("own tenant cannot open its token: %v %v", pos, err)
	}
	if _, err := con.OpenPositionForTest(domain.TenantID("other"), after); err == nil {
		t.Fatal("another tenant opened the token")
	}
}

// TestSignInRateLimited: a client address gets ConsoleSignInRate's burst of attempts, then 429 with
// a truthful Retry-After even for a valid token; another address (named by a trusted proxy) is not
// affected, and the address is allowed again once a token has been earned back.
func TestSignInRateLimited(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	cfg := embedded(t)
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg.ConsoleSignInRate = ratelimit.Rate{Events: 3, Per: time.Minute, Burst: 3}
	loopback, err := clientaddr.ParseTrustedProxies("127.0.0.1,::1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Public.TrustedProxies = loopback
	tb := setup(t, cfg)
	from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	c := tb.client(t)
	for i := range 3 {
		if p := c.do("POST", "/console/signin", url.Values{"token": {"cb_wrong"}}, from("203.0.113.7")); p.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, p.status)
		}
	}
	p := c.do("POST", "/console/signin", url.Values{"token": {tb.op}}, from("203.0.113.7"))
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") != "20" || !strings.Contains(p.body, "Try again in 20 seconds") {
		t.Fatalf("over the limit: %d Retry-After=%q, want 429 after 20 s; body: %s", p.status, p.header.Get("Retry-After"), p.body)
	}
	if p := c.do("POST", "/console/signin", url.Values{"token": {tb.op}}, from("198.51.100.9")); p.status != http.StatusSeeOther {
		t.Fatalf("another address: %d, want 303", p.status)
	}
	mu.Lock()
	now = now.Add(20 * time.Second)
	mu.Unlock()
	if p := c.do("POST", "/console/signin", url.Values{"token": {tb.op}}, from("203.0.113.7")); p.status != http.StatusSeeOther {
		t.Fatalf("after Retry-After: %d, want 303", p.status)
	}
	tb.mu.Lock()
	logs := tb.logs.String()
	tb.mu.Unlock()
	if !strings.Contains(logs, "console sign-in rate limited") || strings.Contains(logs, "203.0.113.7") {
		t.Fatalf("the refusal is logged without the client's address:\n%s", logs)
	}
}

// TestTimelineLinksCommands: the inquiry page groups the timeline by the command that appended each
// event (the command id of the event's metadata), and the API's timeline carries the same ids.
func TestTimelineLinksCommands(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "k1")
	c := tb.client(t)
	csrf := c.signIn(tb.op)
	path := "/console/inquiries/" + string(id)
	if p := c.do("POST", path+"/claim", url.Values{"csrf": {csrf}, "version": {"1"}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("claim: %d %s", p.status, p.body)
	}
	tb.catchUp(t)
	recs, err := tb.app.Store.ReadStream(t.Context(), eventstore.InquiryStream(tb.acme, id), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// want: each event's command id; groups: the page's groups, one per command, in order.
	var want, groups []string
	for _, r := range recs {
		var m domain.Metadata
		if err := json.Unmarshal(r.Metadata, &m); err != nil || m.CommandID == "" {
			t.Fatalf("metadata %s: %v", r.Metadata, err)
		}
		want = append(want, querymodel.CommandRef(m.CommandID))
		if ref := querymodel.CommandRef(m.CommandID); len(groups) == 0 || groups[len(groups)-1] != ref {
			groups = append(groups, ref)
		}
	}
	if len(groups) != 2 {
		t.Fatalf("intake and claim made %d commands, want 2: %v", len(groups), want)
	}
	p := c.get(path)
	var got []string
	for _, m := range regexp.MustCompile(`<li class="command" data-command="([^"]+)">`).FindAllStringSubmatch(p.body, -1) {
		got = append(got, m[1])
	}
	if diff := cmp.Diff(groups, got); diff != "" {
		t.Fatalf("command groups on the page (-want +got):\n%s", diff)
	}
	if n := strings.Count(p.body, `<li data-version="`); n != len(recs) {
		t.Fatalf("the page lists %d events, want %d", n, len(recs))
	}
	tl, err := tb.app.Reader.Timeline(t.Context(), tb.acme, id)
	if err != nil {
		t.Fatal(err)
	}
	var api []string
	for _, e := range tl {
		api = append(api, e.CommandID)
	}
	if diff := cmp.Diff(want, api); diff != "" {
		t.Fatalf("timeline command ids (-want +got):\n%s", diff)
	}
}

// TestConsoleArchive: an operator archives an inquiry with a reason; it leaves the default inbox and
// shows under the archived filter; its page offers no other action and a forged claim is refused
// with nothing appended; a viewer is refused; unarchiving brings it back.
func TestConsoleArchive(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, receipt := tb.intake(t, tb.acme, "k1")
	c := tb.client(t)
	csrf := c.signIn(tb.op)
	path := "/console/inquiries/" + string(id)
	if p := c.do("POST", path+"/archive", url.Values{"csrf": {csrf}, "version": {"1"}}, nil); p.status != http.StatusUnprocessableEntity ||
		!strings.Contains(p.body, `id="error"`) {
		t.Fatalf("archive without a reason: %d", p.status)
	}
	p := c.do("POST", path+"/archive", url.Values{"csrf": {csrf}, "version": {"1"}, "archive_reason": {"duplicate of another"}}, nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("archive: %d %s", p.status, p.body)
	}
	p = c.get(p.header.Get("Location"))
	for _, want := range []string{`id="archived"`, `id="flash"`, `id="unarchive"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("archived page lacks %s", want)
		}
	}
	for _, gone := range []string{`id="claim"`, `id="transition"`, `id="add-note"`} {
		if strings.Contains(p.body, gone) {
			t.Errorf("archived page still offers %s", gone)
		}
	}
	if p := c.get("/console/inbox"); strings.Contains(p.body, receipt) {
		t.Fatal("the default inbox lists an archived inquiry")
	}
	if p := c.get("/console/inbox?archived=true"); !strings.Contains(p.body, receipt) {
		t.Fatal("the archived filter does not list it")
	}
	if p := c.get("/console/inbox?archived=maybe"); p.status != http.StatusBadRequest {
		t.Fatalf("archived=maybe: %d", p.status)
	}
	before := tb.logLen(t)
	if p := c.do("POST", path+"/claim", url.Values{"csrf": {csrf}, "version": {"2"}}, nil); p.status != http.StatusConflict {
		t.Fatalf("claim on an archived inquiry: %d", p.status)
	}
	v := tb.client(t)
	vcsrf := v.signIn(tb.viewer)
	if p := v.do("POST", path+"/unarchive", url.Values{"csrf": {vcsrf}, "version": {"2"}}, nil); p.status != http.StatusForbidden {
		t.Fatalf("viewer unarchive: %d", p.status)
	}
	if tb.logLen(t) != before {
		t.Fatal("a refused write appended")
	}
	if p := c.do("POST", path+"/unarchive", url.Values{"csrf": {csrf}, "version": {"2"}}, nil); p.status != http.StatusSeeOther {
		t.Fatalf("unarchive: %d %s", p.status, p.body)
	}
	tb.catchUp(t)
	if p := c.get("/console/inbox"); !strings.Contains(p.body, receipt) {
		t.Fatal("an unarchived inquiry is not back in the inbox")
	}
}

// TestDisabledPrincipalSignedOut: disabling a principal ends its console session at once (the
// next page redirects to sign-in), its token signs nobody in while disabled, and enabling it does
// not bring the ended session back.
func TestDisabledPrincipalSignedOut(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	c := tb.client(t)
	c.signIn(tb.op)
	if p := c.get("/console/inbox"); p.status != http.StatusOK {
		t.Fatalf("inbox after sign-in: %d", p.status)
	}
	yes, no := true, false
	if _, _, err := tb.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: tb.opP.ID, Disable: &yes}); err != nil {
		t.Fatal(err)
	}
	if p := c.get("/console/inbox"); p.status != http.StatusSeeOther {
		t.Fatalf("session of a disabled principal still serves: %d", p.status)
	}
	if p := tb.client(t).do("POST", "/console/signin", url.Values{"token": {tb.op}}, nil); p.status == http.StatusSeeOther {
		t.Fatalf("a disabled principal signed in: %d %q", p.status, p.header.Get("Location"))
	}
	admin := tb.client(t)
	admin.signIn(tb.admin)
	if p := admin.get("/console/admin"); p.status != http.StatusOK || !strings.Contains(p.body, "operator (disabled)") {
		t.Fatalf("the admin page does not show the principal disabled: %d", p.status)
	}
	if _, _, err := tb.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: tb.opP.ID, Disable: &no}); err != nil {
		t.Fatal(err)
	}
	if p := c.get("/console/inbox"); p.status != http.StatusSeeOther {
		t.Fatalf("an ended session came back after enable: %d", p.status)
	}
}

// TestDisabledPrincipalSignInAudited: a sign-in with the valid token of a disabled principal is
// refused (403, no session cookie, a message that says the account is disabled) and leaves one
// refused entry in the command audit (console_signin, principal_disabled, the principal as actor,
// the request's id), with neither the token nor the principal's name in the audit or the logs;
// an unknown token is refused without an entry. SQLite and Postgres.
func TestDisabledPrincipalSignInAudited(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		tb := setup(t, cfg)
		yes := true
		if _, _, err := tb.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: tb.opP.ID, Disable: &yes}); err != nil {
			t.Fatal(err)
		}
		p := tb.client(t).do("POST", "/console/signin", url.Values{"token": {tb.op}}, nil)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "This account is disabled") || strings.Contains(p.body, "integration") {
			t.Fatalf("sign-in of a disabled principal: %d %q", p.status, p.body)
		}
		if ck := p.header.Get("Set-Cookie"); ck != "" {
			t.Fatalf("a refused sign-in set a cookie: %q", ck)
		}
		if q := tb.client(t).do("POST", "/console/signin", url.Values{"token": {"cb_unknown"}}, nil); q.status != http.StatusUnauthorized {
			t.Fatalf("unknown token: %d", q.status)
		}
		entries, err := tb.app.Audit.Entries(t.Context(), tb.opP.TenantID, 20)
		if err != nil {
			t.Fatal(err)
		}
		var got []commands.AuditEntry
		for _, e := range entries {
			if e.Command == "console_signin" {
				got = append(got, e)
			}
		}
		if len(got) != 1 || got[0].Actor != tb.opP.ID || got[0].Outcome != commands.OutcomeRefused || got[0].Code != "principal_disabled" ||
			got[0].RequestID == "" || got[0].RequestID != p.header.Get("X-Request-Id") {
			t.Fatalf("sign-in audit = %+v, want one refusal of %s under request %q", got, tb.opP.ID, p.header.Get("X-Request-Id"))
		}
		raw, _ := json.Marshal(entries)
		tb.mu.Lock()
		logs := tb.logs.String()
		tb.mu.Unlock()
		for _, secret := range []string{tb.op, "Olga"} {
			if strings.Contains(string(raw), secret) || strings.Contains(logs, secret) {
				t.Fatalf("%q in the audit or the logs", secret)
			}
		}
		if !strings.Contains(logs, "console sign-in refused") {
			t.Fatalf("refusal not logged: %s", logs)
		}
	})
}

// TestTimelinePagesInConsole: an inquiry page shows its timeline a page at a time: the first
// DefaultTimelineLimit events with a link to the later ones, which shows the rest and a link back;
// a note past the hourly limit is refused on the page, saying when to try again.
func TestTimelinePagesInConsole(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "k1")
	ctx := t.Context()
	target := commands.Target{Tenant: tb.acme, InquiryID: id, Actor: tb.opP}
	// 1 + 59 + 2×20 + 2 events: past one page, within the per-hour limits.
	for i := range domain.MaxNotesPerHour - 1 {
		if _, err := tb.app.Commands.AddNote(ctx, commands.AddNote{Target: target, Body: fmt.Sprint("note ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range domain.MaxFollowUpsPerHour {
		fu, err := tb.app.Commands.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target, In: 2 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.app.Commands.CancelFollowUp(ctx, commands.CancelFollowUp{Target: target, JobID: fu.JobID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.app.Commands.Claim(ctx, commands.Claim{Target: target}); err != nil {
		t.Fatal(err)
	}
	tb.catchUp(t)
	c := tb.client(t)
	csrf := c.signIn(tb.op)
	path := "/console/inquiries/" + string(id)
	first := c.get(path)
	next := fmt.Sprintf(`href="?from=%d#h-timeline"`, queries.DefaultTimelineLimit)
	if n := strings.Count(first.body, `<li data-version="`); n != queries.DefaultTimelineLimit || !strings.Contains(first.body, next) {
		t.Fatalf("first page: %d events, link to the next: %v", n, strings.Contains(first.body, next))
	}
	second := c.get(fmt.Sprintf("%s?from=%d", path, queries.DefaultTimelineLimit))
	if n := strings.Count(second.body, `<li data-version="`); n != 2 || !strings.Contains(second.body, `data-version="102"`) ||
		strings.Contains(second.body, `rel="next"`) || !strings.Contains(second.body, `First entries`) {
		t.Fatalf("second page: %d events", n)
	}
	// The 60th note in the hour is accepted, the 61st refused on the page with when to retry.
	if _, err := tb.app.Commands.AddNote(ctx, commands.AddNote{Target: target, Body: "the 60th"}); err != nil {
		t.Fatal(err)
	}
	p := c.do("POST", path+"/note", url.Values{"csrf": {csrf}, "version": {"103"}, "body": {"the 61st"}}, nil)
	if p.status != http.StatusTooManyRequests || !strings.Contains(p.body, "Not done: at most 60 notes per inquiry per hour; try again in") {
		t.Fatalf("61st note: %d", p.status)
	}
}
