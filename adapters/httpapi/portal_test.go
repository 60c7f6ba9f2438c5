package httpapi_test

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/tenancy"
)

const portalBody = `{"name":"Ada Lovelace","email":"ada@example.com","external_id":"cust-42","subject":"Invoice is wrong","message":"Invoice 42 charges me twice.","category":"billing"}`

// integration creates an integration principal of slug and returns its token.
func (tb *testBundle) integration(t *testing.T, slug, name string) string {
	t.Helper()
	_, tok, err := tb.app.Tenancy.CreatePrincipal(t.Context(), slug, name, domain.RoleIntegration, "")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (tb *testBundle) portalSubmit(t *testing.T, token, key, body string) resp {
	t.Helper()
	h := map[string]string{}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return tb.do(t, "POST", "/v1/inquiries", token, h, body)
}

// TestIntegrationTokenRefusedEverywhere: an integration's token opens the authenticated intake and
// the portal reads, and every other authenticated route answers 403 with nothing changed; it
// signs nobody in to the console.
func TestIntegrationTokenRefusedEverywhere(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	_, id := tb.submit(t, "k-1")
	before := tb.logLen(t)
	open := func(method, path string) bool {
		switch {
		case method == http.MethodPost && path == "/v1/inquiries",
			strings.HasPrefix(path, "/v1/portal/"),
			method == http.MethodPost && path == "/v1/inquiries/{id}/attachments":
			return true
		}
		return false
	}
	// Routes without bearer authentication have their own threat models (public intake, Slack's
	// signed callbacks, the console's sessions, health).
	unauthenticated := func(path string) bool {
		for _, p := range []string{"/v1/public/", "/f/", "/healthz", "/readyz", "/v1/openapi.json", "/slack/", "/console", "/inquiries/r/", "/metrics", "/v1/slack/oauth/callback"} {
			if strings.HasPrefix(path, p) {
				return true
			}
		}
		return false
	}
	vars := regexp.MustCompile(`\{[a-z_]+\}`)
	checked := 0
	err := httpapi.WalkRoutes(func(path string, methods []string) {
		if unauthenticated(path) {
			return
		}
		for _, m := range methods {
			if open(m, path) {
				continue
			}
			p := vars.ReplaceAllStringFunc(path, func(v string) string {
				if v == "{id}" {
					return id
				}
				return "x"
			})
			body := ""
			if m == http.MethodPost || m == http.MethodPut {
				body = `{}`
			}
			r := tb.do(t, m, p, integ, map[string]string{"If-Match": `"1"`}, body)
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s with an integration token = %d, want 403", m, path, r.status)
			}
			checked++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d routes checked; the walk found too few", checked)
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("log grew from %d to %d events", before, n)
	}
	res, err := http.PostForm(tb.srv.URL+"/console/signin", url.Values{"token": {integ}})
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("console sign-in with an integration token = %d with %d cookies", res.StatusCode, len(res.Cookies()))
	}
	// Nor can an integration own or watch an inquiry.
	p, _, err := tb.app.Tenancy.CreatePrincipal(t.Context(), "acme", "Portal 2", domain.RoleIntegration, "support")
	if err != nil {
		t.Fatal(err)
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/assignment", tb.admin, map[string]string{"If-Match": `"1"`}, `{"owner":"`+string(p.ID)+`"}`); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("assign to an integration = %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/watchers", tb.admin, nil, `{"principal":"`+string(p.ID)+`"}`); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("an integration as watcher = %d %s", r.status, r.raw)
	}
}

// TestPortalIntakeIdempotency: the same key with the same body answers the first result; another
// body is 422; the key is required; keys are the submitter's own.
func TestPortalIntakeIdempotency(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	first := tb.portalSubmit(t, integ, "p-1", portalBody)
	if first.status != http.StatusCreated || first.body["receipt"] == nil || first.body["id"] == nil || first.body["version"] != float64(1) {
		t.Fatalf("portal intake = %d %s", first.status, first.raw)
	}
	before := tb.logLen(t)
	again := tb.portalSubmit(t, integ, "p-1", portalBody)
	if again.status != http.StatusCreated || again.body["id"] != first.body["id"] || again.body["receipt"] != first.body["receipt"] {
		t.Fatalf("replay = %d %s, want %s", again.status, again.raw, first.raw)
	}
	other := tb.portalSubmit(t, integ, "p-1", strings.Replace(portalBody, "twice", "three times", 1))
	if other.status != http.StatusUnprocessableEntity || other.body["error"].(map[string]any)["code"] != "idempotency_key_reused" {
		t.Fatalf("same key, other body = %d %s", other.status, other.raw)
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("replay and mismatch appended: %d → %d events", before, n)
	}
	if r := tb.portalSubmit(t, integ, "", portalBody); r.status != http.StatusBadRequest || r.body["error"].(map[string]any)["code"] != "idempotency_key_required" {
		t.Fatalf("no key = %d %s", r.status, r.raw)
	}
	// Another integration's equal key is its own inquiry; an operator may submit too; a viewer not.
	second := tb.portalSubmit(t, tb.integration(t, "acme", "Portal B"), "p-1", portalBody)
	if second.status != http.StatusCreated || second.body["id"] == first.body["id"] || second.body["receipt"] == first.body["receipt"] {
		t.Fatalf("another integration's key p-1 = %d %s", second.status, second.raw)
	}
	if r := tb.portalSubmit(t, tb.op, "p-1", portalBody); r.status != http.StatusCreated || r.body["id"] == first.body["id"] {
		t.Fatalf("operator submit = %d %s", r.status, r.raw)
	}
	if r := tb.portalSubmit(t, tb.viewer, "p-2", portalBody); r.status != http.StatusForbidden {
		t.Fatalf("viewer submit = %d %s", r.status, r.raw)
	}
	// Same validation as public intake: a bad email and an unknown field are refused.
	if r := tb.portalSubmit(t, integ, "p-3", strings.Replace(portalBody, "ada@example.com", "ada", 1)); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad email = %d %s", r.status, r.raw)
	}
	if r := tb.portalSubmit(t, integ, "p-4", strings.Replace(portalBody, `"name"`, `"website":"x","name"`, 1)); r.status != http.StatusBadRequest {
		t.Fatalf("honeypot field on the portal route = %d %s", r.status, r.raw)
	}
	// The operator's detail shows the source and the requested priority and team.
	withPrio := tb.portalSubmit(t, integ, "p-5", strings.Replace(portalBody, `"category":"billing"`, `"category":"billing","priority":"high","team":"billing"`, 1))
	if withPrio.status != http.StatusCreated {
		t.Fatalf("priority and team = %d %s", withPrio.status, withPrio.raw)
	}
	d := tb.do(t, "GET", "/v1/inquiries/"+withPrio.body["id"].(string)+"?consistent=true", tb.op, nil, "")
	if d.status != 200 || d.body["source"] != "authenticated_portal" || d.body["priority"] != "high" || d.body["team"] != "billing" {
		t.Fatalf("detail = %d %s", d.status, d.raw)
	}
}

// TestPortalReadsOnlyOwnSubmissions: a portal reads its own inquiries by receipt and by external
// id; another integration (same tenant or another) gets 404 and an empty list.
func TestPortalReadsOnlyOwnSubmissions(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	a, b := tb.integration(t, "acme", "Portal A"), tb.integration(t, "acme", "Portal B")
	g := tb.integration(t, "globex", "Globex portal")
	r := tb.portalSubmit(t, a, "a-1", portalBody)
	if r.status != http.StatusCreated {
		t.Fatalf("intake = %d %s", r.status, r.raw)
	}
	receipt := r.body["receipt"].(string)
	if got := tb.do(t, "GET", "/v1/portal/inquiries/"+receipt, a, nil, ""); got.status != 200 || got.body["receipt"] != receipt || got.body["status"] != "open" {
		t.Fatalf("own receipt = %d %s", got.status, got.raw)
	}
	for name, tok := range map[string]string{"same tenant": b, "other tenant": g} {
		if got := tb.do(t, "GET", "/v1/portal/inquiries/"+receipt, tok, nil, ""); got.status != http.StatusNotFound {
			t.Errorf("%s reads the receipt = %d %s", name, got.status, got.raw)
		}
		if got := tb.do(t, "GET", "/v1/portal/inquiries?external_id=cust-42", tok, nil, ""); got.status != 200 || len(got.body["items"].([]any)) != 0 {
			t.Errorf("%s lists cust-42 = %d %s", name, got.status, got.raw)
		}
	}
	if got := tb.do(t, "GET", "/v1/portal/inquiries/CB-UNKNOWN", a, nil, ""); got.status != http.StatusNotFound {
		t.Fatalf("unknown receipt = %d", got.status)
	}
	// B files for the same customer id: each portal lists its own only.
	if r := tb.portalSubmit(t, b, "b-1", portalBody); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	if r := tb.portalSubmit(t, a, "a-2", strings.Replace(portalBody, "Invoice is wrong", "Second question", 1)); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	l := tb.do(t, "GET", "/v1/portal/inquiries?external_id=cust-42", a, nil, "")
	items, _ := l.body["items"].([]any)
	if l.status != 200 || len(items) != 2 || items[0].(map[string]any)["subject"] != "Second question" {
		t.Fatalf("A's list = %d %s", l.status, l.raw)
	}
	if r := tb.do(t, "GET", "/v1/portal/inquiries", a, nil, ""); r.status != http.StatusBadRequest {
		t.Fatalf("list without external_id = %d", r.status)
	}
	if r := tb.do(t, "GET", "/v1/portal/inquiries?external_id=cust-42&status=open", a, nil, ""); r.status != http.StatusBadRequest {
		t.Fatalf("unknown parameter = %d", r.status)
	}
}

// TestRequesterViewHasNoInternalFields: after operators triage, route, claim, note and resolve,
// the portal's view carries only requester-facing fields, and no internal value anywhere.
func TestRequesterViewHasNoInternalFields(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	r := tb.portalSubmit(t, integ, "v-1", portalBody)
	if r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	id, receipt := r.body["id"].(string), r.body["receipt"].(string)
	created := tb.do(t, "GET", "/v1/portal/inquiries/"+receipt, integ, nil, "")
	steps := []struct{ path, ifMatch, body string }{
		{"/transitions", `"1"`, `{"to":"triaged","priority":"urgent"}`},
		{"/notes", "", `{"body":"internal: customer is on the watch list"}`},
		{"/claim", "", ""},
	}
	for _, s := range steps {
		h := map[string]string{}
		if s.ifMatch != "" {
			h["If-Match"] = s.ifMatch
		}
		if res := tb.do(t, "POST", "/v1/inquiries/"+id+s.path, tb.op, h, s.body); res.status != 200 {
			t.Fatalf("%s = %d %s", s.path, res.status, res.raw)
		}
	}
	open := tb.do(t, "GET", "/v1/portal/inquiries/"+receipt, integ, nil, "")
	if open.body["status"] != "open" || open.body["updated_at"] != created.body["updated_at"] {
		t.Fatalf("internal work moved the requester's view: %s then %s", created.raw, open.raw)
	}
	if res := tb.do(t, "POST", "/v1/inquiries/"+id+"/transitions", tb.op, map[string]string{"If-Match": `"5"`}, `{"to":"resolved"}`); res.status != 200 {
		t.Fatalf("resolve = %d %s", res.status, res.raw)
	}
	for _, v := range []resp{tb.do(t, "GET", "/v1/portal/inquiries/"+receipt, integ, nil, ""), tb.do(t, "GET", "/v1/portal/inquiries?external_id=cust-42", integ, nil, "")} {
		if v.status != 200 {
			t.Fatalf("view = %d %s", v.status, v.raw)
		}
		view := v.body
		if items, ok := v.body["items"].([]any); ok {
			view = items[0].(map[string]any)
		}
		var keys []string
		for k := range view {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := []string{"category", "created_at", "external_id", "messages", "receipt", "status", "subject", "updated_at"}
		if !slices.Equal(keys, want) {
			t.Errorf("view keys = %v, want %v", keys, want)
		}
		if view["status"] != "closed" || view["updated_at"] == created.body["updated_at"] {
			t.Errorf("resolved view = %v", view)
		}
		for _, internal := range []string{id, tb.opID, "Olga", "watch list", "urgent", "support", "resolved", "in_progress", "triaged"} {
			if strings.Contains(v.raw, internal) {
				t.Errorf("requester view contains %q: %s", internal, v.raw)
			}
		}
	}
}

// TestRequesterViewTenantSetting: a tenant's portal setting adds priority and team to the
// requester-facing reads, each only when allowed: by default neither, with show_priority the
// priority alone, with both both; notes and owner never. The setting is the tenant's own: another
// tenant's changes nothing.
func TestRequesterViewTenantSetting(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	r := tb.portalSubmit(t, integ, "s-1", `{"name":"Ada","email":"ada@example.com","external_id":"cust-9","subject":"Invoice","message":"Twice.","category":"billing","team":"support"}`)
	if r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	id, receipt := r.body["id"].(string), r.body["receipt"].(string)
	if res := tb.do(t, "POST", "/v1/inquiries/"+id+"/transitions", tb.op, map[string]string{"If-Match": `"1"`}, `{"to":"triaged","priority":"urgent"}`); res.status != 200 {
		t.Fatal(res.raw)
	}
	if res := tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.op, nil, `{"body":"internal remark"}`); res.status != 200 {
		t.Fatal(res.raw)
	}
	for _, c := range []struct {
		slug           string
		set            tenancy.PortalView
		priority, team any
	}{
		{"", tenancy.PortalView{}, nil, nil},
		{"globex", tenancy.PortalView{ShowPriority: true, ShowTeam: true}, nil, nil},
		{"acme", tenancy.PortalView{ShowPriority: true}, "urgent", nil},
		{"acme", tenancy.PortalView{ShowPriority: true, ShowTeam: true}, "urgent", "support"},
		{"acme", tenancy.PortalView{ShowTeam: true}, nil, "support"},
		{"acme", tenancy.PortalView{}, nil, nil},
	} {
		if c.slug != "" {
			if _, err := tb.app.Tenancy.SetPortalView(t.Context(), c.slug, c.set); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range []resp{tb.do(t, "GET", "/v1/portal/inquiries/"+receipt, integ, nil, ""), tb.do(t, "GET", "/v1/portal/inquiries?external_id=cust-9", integ, nil, "")} {
			view := v.body
			if items, ok := v.body["items"].([]any); ok && len(items) == 1 {
				view = items[0].(map[string]any)
			}
			if v.status != 200 || view["priority"] != c.priority || view["team"] != c.team {
				t.Errorf("%s %+v: view = %d %s", c.slug, c.set, v.status, v.raw)
			}
			for _, internal := range []string{"internal remark", "Olga", tb.opID, "triaged"} {
				if strings.Contains(v.raw, internal) {
					t.Errorf("%s %+v: view contains %q", c.slug, c.set, internal)
				}
			}
		}
	}
	if _, err := tb.app.Tenancy.SetPortalView(t.Context(), "nope", tenancy.PortalView{ShowTeam: true}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown tenant: %v", err)
	}
}

// TestPortalRateLimitPerPrincipal: each principal has its own budget; a limited one is 429 with
// Retry-After and nothing appended.
func TestPortalRateLimitPerPrincipal(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Public.PortalRate = ratelimit.Rate{Events: 1, Per: time.Hour, Burst: 2}
	})
	a, b := tb.integration(t, "acme", "Portal A"), tb.integration(t, "acme", "Portal B")
	for i, k := range []string{"r-1", "r-2"} {
		if r := tb.portalSubmit(t, a, k, portalBody); r.status != http.StatusCreated {
			t.Fatalf("submission %d = %d %s", i, r.status, r.raw)
		}
	}
	before := tb.logLen(t)
	r := tb.portalSubmit(t, a, "r-3", portalBody)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("third submission = %d %s", r.status, r.raw)
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("a limited submission appended (%d → %d)", before, n)
	}
	if r := tb.portalSubmit(t, b, "r-1", portalBody); r.status != http.StatusCreated {
		t.Fatalf("another principal = %d %s", r.status, r.raw)
	}
}

// TestTenantCategoriesBindJSONIntake: once a tenant offers categories, the public JSON route and
// the portal route refuse any other category (422 on category), as the form does.
func TestTenantCategoriesBindJSONIntake(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	if _, err := tb.app.Tenancy.SetProfile(t.Context(), "acme", nil, []tenancy.Category{{Slug: "sales", Label: "Sales"}}); err != nil {
		t.Fatal(err)
	}
	before := tb.logLen(t)
	pub := tb.do(t, "POST", "/v1/public/acme/inquiries", "", map[string]string{"Idempotency-Key": "c-1"}, submission)
	port := tb.portalSubmit(t, integ, "c-1", portalBody)
	for name, r := range map[string]resp{"public": pub, "portal": port} {
		if r.status != http.StatusUnprocessableEntity || r.body["error"].(map[string]any)["field"] != "category" {
			t.Errorf("%s intake of category billing = %d %s", name, r.status, r.raw)
		}
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("refused intakes appended (%d → %d)", before, n)
	}
	if r := tb.portalSubmit(t, integ, "c-2", strings.Replace(portalBody, "billing", "sales", 1)); r.status != http.StatusCreated {
		t.Fatalf("offered category = %d %s", r.status, r.raw)
	}
}
