package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestIfMatchStrongComparison: If-Match as RFC 9110 defines it with strong comparison.
func TestIfMatchStrongComparison(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "k")
	note := func(ifMatch string) resp {
		return tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.op, map[string]string{"If-Match": ifMatch}, `{"body":"n"}`)
	}
	tests := []struct {
		ifMatch string
		status  int
	}{
		{`W/"1"`, 412},      // weak never matches
		{`w/"1"`, 400},      // "W/" is case-sensitive: not an entity tag
		{`1`, 400},          // unquoted
		{`"1`, 400},         // unterminated
		{`""1""`, 400},      // quote inside
		{`"x"`, 412},        // well-formed, not a version of ours: matches nothing
		{`"01"`, 412},       // not the canonical version
		{`"1", "2"`, 400},   // at most one version
		{`W/"1", "9"`, 412}, // the strong tag decides
		{`W/"9", "1"`, 200}, // ... and matches
		{`*`, 200},          // any existing inquiry
		{` "3" `, 200},      // optional white space
		{`"3"`, 412},        // now at 4
	}
	for _, tt := range tests {
		r := note(tt.ifMatch)
		if r.status != tt.status {
			t.Fatalf("If-Match %s = %d %s, want %d", tt.ifMatch, r.status, r.raw, tt.status)
		}
		if tt.status == 412 {
			e := r.body["error"].(map[string]any)
			if e["current_version"] == nil || r.header.Get("ETag") == "" {
				t.Fatalf("If-Match %s: 412 without the current version: %s %v", tt.ifMatch, r.raw, r.header)
			}
		}
	}
	unknown := tb.do(t, "POST", "/v1/inquiries/00000000-0000-8000-8000-000000000000/notes", tb.op, map[string]string{"If-Match": "*"}, `{"body":"n"}`)
	if unknown.status != 404 {
		t.Fatalf("* on an unknown inquiry = %d, want 404 (as without the condition)", unknown.status)
	}
}

// TestLostRaceOverHTTP: a stale If-Match answers 412 with the current version and who changed it,
// and the message names no stream, tenant id or store revision.
func TestLostRaceOverHTTP(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "k")
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/claim", tb.op, map[string]string{"If-Match": `"1"`}, ""); r.status != 200 {
		t.Fatal(r.raw)
	}
	r := tb.do(t, "POST", "/v1/inquiries/"+id+"/transitions", tb.admin, map[string]string{"If-Match": `"1"`}, `{"to":"cancelled","reason":"dup"}`)
	e, _ := r.body["error"].(map[string]any)
	if r.status != 412 || e["current_version"] != 3.0 || e["changed_by"] != tb.opID || r.header.Get("ETag") != `"3"` {
		t.Fatalf("stale write = %d %s ETag=%s", r.status, r.raw, r.header.Get("ETag"))
	}
	ten, _, _, err := tb.app.Tenancy.PublicTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, internal := range []string{"inquiry-", string(ten.ID), id, "append", "revision", "SELECT"} {
		if strings.Contains(e["message"].(string), internal) {
			t.Errorf("412 message exposes %q: %s", internal, r.raw)
		}
	}
}

// TestAuthorizationSchemeCaseInsensitive: the scheme name is case-insensitive (RFC 9110 §11.1);
// anything else is 401.
func TestAuthorizationSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for _, h := range []string{"Bearer " + tb.op, "bearer " + tb.op, "BEARER " + tb.op, "BeArEr   " + tb.op} {
		if r := tb.do(t, "GET", "/v1/inquiries", "", map[string]string{"Authorization": h}, ""); r.status != 200 {
			t.Errorf("%.10s… = %d", h, r.status)
		}
	}
	for _, h := range []string{"Basic " + tb.op, "Bearer" + tb.op, "Bearer", "Bearer " + tb.op + " x", tb.op} {
		if r := tb.do(t, "GET", "/v1/inquiries", "", map[string]string{"Authorization": h}, ""); r.status != http.StatusUnauthorized {
			t.Errorf("%.10s… = %d, want 401", h, r.status)
		}
	}
}

// TestStrictJSONBodies: a body means one thing to every parser: duplicate keys and keys that differ
// only in case are 400, on public and operator routes; the media type is exactly application/json,
// with at most a utf-8 charset.
func TestStrictJSONBodies(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "k")
	const ok = `{"name":"Ada","email":"ada@example.com","subject":"s","message":"m"}`
	for _, b := range []string{
		`{"name":"Ada","email":"ada@example.com","email":"eve@example.com","subject":"s","message":"m"}`,
		`{"name":"Ada","Email":"ada@example.com","subject":"s","message":"m"}`,
		`{"name":"Ada","email":"ada@example.com","EMAIL":"eve@example.com","subject":"s","message":"m"}`,
		`{"name":"Ada","email":"ada@example.com","subject":"s","message":"m","tenant_id":"t"}`,
	} {
		if r := tb.intake(t, "acme", nil, b); r.status != 400 || r.code() != "bad_request" {
			t.Errorf("intake %s = %d %s, want 400", b, r.status, r.raw)
		}
	}
	for _, b := range []string{`{"body":"a","body":"b"}`, `{"Body":"a"}`, `{"body":"a","BODY":"b"}`} {
		if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.op, nil, b); r.status != 400 {
			t.Errorf("note %s = %d %s, want 400", b, r.status, r.raw)
		}
	}
	for ct, want := range map[string]int{
		"application/json": 202, "application/json; charset=utf-8": 202, "application/json;charset=UTF-8": 202,
		"": 415, "text/json": 415, "application/jsonx": 415, "application/json-patch+json": 415,
		"application/json; charset=iso-8859-1": 415, "application/json; profile=x": 415, "application/x-www-form-urlencoded": 415,
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tb.srv.URL+"/v1/public/acme/inquiries", strings.NewReader(ok))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Content-Type %q = %d, want %d", ct, res.StatusCode, want)
		}
	}
	if d := tb.do(t, "GET", "/v1/inquiries/"+id, tb.op, nil, ""); d.body["version"] != 1.0 {
		t.Fatalf("refused bodies changed the inquiry: %s", d.raw)
	}
}

// TestCursorsAndPositionsAreSealed: a list cursor works only for the tenant and filter that produced
// it (forged, foreign or other-filter cursors are 400), and read-your-writes positions are opaque
// tokens that only their tenant can use and that reveal no log position.
func TestCursorsAndPositionsAreSealed(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for i := range 3 {
		tb.submit(t, "k"+string(rune('a'+i)))
	}
	page := tb.do(t, "GET", "/v1/inquiries?limit=1&status=new", tb.op, nil, "")
	cursor, _ := page.body["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("no cursor: %s", page.raw)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?limit=1&status=new&cursor="+cursor, tb.viewer, nil, ""); r.status != 200 || len(r.body["items"].([]any)) != 1 {
		t.Fatalf("the tenant's own cursor = %d %s", r.status, r.raw)
	}
	raw, mac, _ := strings.Cut(cursor, ".")
	forged := []string{
		raw, // no MAC
		raw + "." + strings.Repeat("A", len(mac)), // wrong MAC
		"MTIzfGFiYw." + mac,                       // another position under the same MAC
	}
	for _, c := range forged {
		if r := tb.do(t, "GET", "/v1/inquiries?limit=1&status=new&cursor="+c, tb.op, nil, ""); r.status != 400 {
			t.Errorf("forged cursor %q = %d", c, r.status)
		}
	}
	for _, q := range []string{"status=triaged", "", "status=new&priority=high", "status=new&owner=" + tb.opID} {
		if r := tb.do(t, "GET", "/v1/inquiries?limit=1&"+q+"&cursor="+cursor, tb.op, nil, ""); r.status != 400 {
			t.Errorf("cursor of status=new with %q = %d, want 400", q, r.status)
		}
	}

	_, id := tb.submit(t, "kpos")
	w := tb.do(t, "POST", "/v1/inquiries/"+id+"/notes", tb.op, nil, `{"body":"n"}`)
	pos := w.body["position"].(string)
	if pos == "" || w.header.Get("Casebook-Position") != pos {
		t.Fatalf("write = %s", w.raw)
	}
	head, err := tb.app.Store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pos, head.String()) {
		t.Fatalf("position token %q shows the log position %s", pos, head)
	}
	if r := tb.do(t, "GET", "/v1/inquiries/"+id+"?min_position="+pos, tb.viewer, nil, ""); r.status != 200 {
		t.Fatalf("own position = %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?min_position="+pos, tb.other, nil, ""); r.status != 400 {
		t.Fatalf("another tenant's position = %d %s, want 400", r.status, r.raw)
	}
	tampered := pos[:len(pos)-2] + "AA"
	if tampered == pos { // the token already ended so: tamper it another way
		tampered = pos[:len(pos)-2] + "BB"
	}
	for _, p := range []string{head.String(), "0", tampered} {
		if r := tb.do(t, "GET", "/v1/inquiries", tb.op, map[string]string{"Casebook-Min-Position": p}, ""); r.status != 400 {
			t.Errorf("position %q = %d, want 400", p, r.status)
		}
	}
}
