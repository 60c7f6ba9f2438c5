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
	ten, _, err := tb.app.Tenancy.PublicTenant(t.Context(), "acme")
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
