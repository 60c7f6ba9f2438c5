package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/tenancy"
)

// TestCrossTenantParamsAndBodies extends TestCrossTenantRoutes to ids that travel in query
// parameters and bodies: another tenant's principal as an owner filter or an assignee, and another
// tenant's cursor, behave exactly like unknown ones and reveal nothing.
func TestCrossTenantParamsAndBodies(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	_, acmeID := tb.submit(t, "k1")
	for _, k := range []string{"k2", "k3"} {
		tb.submit(t, k)
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+acmeID+"/claim", tb.op, nil, ""); r.status != 200 {
		t.Fatal(r.raw)
	}
	globexAdmin, err := tb.app.Tenancy.Authenticate(ctx, tb.other)
	if err != nil {
		t.Fatal(err)
	}
	globexOp, _, err := tb.app.Tenancy.CreatePrincipal(ctx, "globex", "Gus", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	globexIntake := tb.intake(t, "globex", map[string]string{"Idempotency-Key": "g1"}, submission)
	if globexIntake.status != 202 {
		t.Fatal(globexIntake.raw)
	}
	gl := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.other, nil, "")
	globexID := gl.body["items"].([]any)[0].(map[string]any)["id"].(string)
	unknown := "00000000-0000-8000-8000-000000000000"

	// Owner filters: another tenant's principal finds what an unknown id finds, nothing.
	for _, c := range []struct{ token, owner string }{
		{tb.other, tb.opID}, {tb.other, unknown}, {tb.admin, string(globexOp.ID)}, {tb.admin, string(globexAdmin.ID)},
	} {
		r := tb.do(t, "GET", "/v1/inquiries?owner="+c.owner, c.token, nil, "")
		if r.status != 200 || len(r.body["items"].([]any)) != 0 || strings.Contains(r.raw, acmeID) {
			t.Errorf("owner=%s: %d %s", c.owner, r.status, r.raw)
		}
	}
	// Assignees in bodies: another tenant's principal is refused exactly like an unknown one, both ways.
	for _, c := range []struct{ token, id, version string }{{tb.admin, acmeID, `"3"`}, {tb.other, globexID, `"1"`}} {
		foreignOwner := string(globexOp.ID)
		if c.token == tb.other {
			foreignOwner = tb.opID
		}
		h := map[string]string{"If-Match": c.version}
		foreign := tb.do(t, "POST", "/v1/inquiries/"+c.id+"/assignment", c.token, h, `{"owner":"`+foreignOwner+`"}`)
		missing := tb.do(t, "POST", "/v1/inquiries/"+c.id+"/assignment", c.token, h, `{"owner":"`+unknown+`"}`)
		if foreign.status != 422 || foreign.status != missing.status || foreign.code() != missing.code() ||
			foreign.body["error"].(map[string]any)["message"] != missing.body["error"].(map[string]any)["message"] {
			t.Errorf("assign foreign owner = %d %s; unknown owner = %d %s", foreign.status, foreign.raw, missing.status, missing.raw)
		}
	}
	// A cursor from acme's listing, replayed by globex, is refused: cursors are bound to their tenant.
	page := tb.do(t, "GET", "/v1/inquiries?limit=1", tb.admin, nil, "")
	cursor, _ := page.body["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("no cursor: %s", page.raw)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?cursor="+cursor, tb.other, nil, ""); r.status != 400 || strings.Contains(r.raw, acmeID) {
		t.Errorf("globex with acme's cursor = %d %s, want 400", r.status, r.raw)
	}
	// Nothing changed on either side.
	if d := tb.do(t, "GET", "/v1/inquiries/"+acmeID, tb.admin, nil, ""); d.body["version"] != 3.0 || d.body["owner"] != tb.opID {
		t.Errorf("acme's inquiry changed: %s", d.raw)
	}
	if d := tb.do(t, "GET", "/v1/inquiries/"+globexID, tb.other, nil, ""); d.body["version"] != 1.0 {
		t.Errorf("globex's inquiry changed: %s", d.raw)
	}
}

// unauthorized strips what legitimately differs between two 401 answers: the request id.
func unauthorized(r resp) string {
	return r.header.Get("WWW-Authenticate") + " " + strings.ReplaceAll(r.raw, r.header.Get("X-Request-Id"), "")
}

// TestRevokedAndExpiredTokens: over HTTP a revoked or an expired token is answered exactly like an
// unknown one, and the principal's other tokens keep working.
func TestRevokedAndExpiredTokens(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	tb := setupWith(t, func(c *app.Config) { c.Public, c.Now = unlimited, clk.Now })
	ctx := t.Context()
	p, err := tb.app.Tenancy.Authenticate(ctx, tb.op)
	if err != nil {
		t.Fatal(err)
	}
	_, short, err := tb.app.Tenancy.CreateToken(ctx, "acme", p.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	revoked, revokedTok, err := tb.app.Tenancy.CreateToken(ctx, "acme", p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{short, revokedTok} {
		if r := tb.do(t, "GET", "/v1/inquiries", tok, nil, ""); r.status != 200 {
			t.Fatalf("fresh token = %d", r.status)
		}
	}
	if err := tb.app.Tenancy.RevokeToken(ctx, "acme", revoked.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	want := unauthorized(tb.do(t, "GET", "/v1/inquiries", "cb_unknown", nil, ""))
	for name, tok := range map[string]string{"revoked": revokedTok, "expired": short} {
		r := tb.do(t, "GET", "/v1/inquiries", tok, nil, "")
		if r.status != http.StatusUnauthorized || unauthorized(r) != want {
			t.Errorf("%s token = %d %q, want exactly %q", name, r.status, unauthorized(r), want)
		}
	}
	if r := tb.do(t, "GET", "/v1/inquiries", tb.op, nil, ""); r.status != 200 {
		t.Fatalf("the principal's first token = %d", r.status)
	}
}

// TestRoleAndTeamRefusalsOverHTTP: the command layer's refusals surface as 403 and change nothing;
// the permitted counterparts succeed.
func TestRoleAndTeamRefusalsOverHTTP(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "k")
	billing, billingTok, err := tb.app.Tenancy.CreatePrincipal(t.Context(), "acme", "Bill", domain.RoleOperator, "billing")
	if err != nil {
		t.Fatal(err)
	}
	v1 := map[string]string{"If-Match": `"1"`}
	refusals := []struct {
		name, token, path, body string
	}{
		{"viewer triages", tb.viewer, "/transitions", `{"to":"triaged"}`},
		{"viewer notes", tb.viewer, "/notes", `{"body":"x"}`},
		{"viewer assigns", tb.viewer, "/assignment", `{"owner":"` + tb.opID + `"}`},
		{"operator assigns to another team", tb.op, "/assignment", `{"owner":"` + string(billing.ID) + `"}`},
		{"operator of another team assigns into support", billingTok, "/assignment", `{"owner":"` + tb.opID + `"}`},
	}
	for _, rf := range refusals {
		if r := tb.do(t, "POST", "/v1/inquiries/"+id+rf.path, rf.token, v1, rf.body); r.status != 403 || r.code() != "forbidden" {
			t.Errorf("%s = %d %s", rf.name, r.status, r.raw)
		}
	}
	if d := tb.do(t, "GET", "/v1/inquiries/"+id, tb.viewer, nil, ""); d.body["version"] != 1.0 {
		t.Fatalf("refusals changed the inquiry: %s", d.raw)
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/assignment", tb.admin, v1, `{"owner":"`+string(billing.ID)+`"}`); r.status != 200 {
		t.Fatalf("admin assigns across teams = %d %s", r.status, r.raw)
	}
}

// TestDisabledPrincipalOverHTTP: from the request after an admin disables a principal, its valid
// token is refused with 403 principal_disabled (reads and writes, nothing appended, each refusal
// audited); enabling it restores the same token.
func TestDisabledPrincipalOverHTTP(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "k")
	yes, no := true, false
	if _, _, err := tb.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: domain.PrincipalID(tb.opID), Disable: &yes}); err != nil {
		t.Fatal(err)
	}
	before := tb.do(t, "GET", "/v1/inquiries/"+id, tb.admin, nil, "")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/inquiries", ""},
		{"POST", "/v1/inquiries/" + id + "/claim", ""},
	} {
		r := tb.do(t, c.method, c.path, tb.op, nil, c.body)
		if r.status != http.StatusForbidden || !strings.Contains(r.raw, `"principal_disabled"`) || !strings.Contains(r.raw, "disabled") {
			t.Errorf("%s %s by a disabled principal = %d %s, want 403 principal_disabled", c.method, c.path, r.status, r.raw)
		}
	}
	if after := tb.do(t, "GET", "/v1/inquiries/"+id, tb.admin, nil, ""); before.header.Get("ETag") == "" || after.header.Get("ETag") != before.header.Get("ETag") {
		t.Fatalf("a refused claim appended: ETag %s → %s", before.header.Get("ETag"), after.header.Get("ETag"))
	}
	ten, err := tb.app.Tenancy.TenantBySlug(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tb.app.Audit.Entries(t.Context(), ten.ID, 20)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range entries {
		if e.Command == "api_request" && e.Code == "principal_disabled" && string(e.Actor) == tb.opID && e.Outcome == "refused" {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("audit = %+v, want the two refusals", entries)
	}
	if _, _, err := tb.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: domain.PrincipalID(tb.opID), Disable: &no}); err != nil {
		t.Fatal(err)
	}
	if r := tb.do(t, "GET", "/v1/inquiries", tb.op, nil, ""); r.status != 200 {
		t.Fatalf("enabled again = %d %s", r.status, r.raw)
	}
}
