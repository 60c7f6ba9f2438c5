package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/casebook/casebook/commands"
)

// TestAuditOverHTTP: commands reached over HTTP are audited under the request's X-Request-Id, the
// refused ones too; requests refused before reaching a command (no If-Match) are not commands.
func TestAuditOverHTTP(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "k")
	refused := tb.do(t, "POST", "/v1/inquiries/"+id+"/claim", tb.viewer, nil, "")
	accepted := tb.do(t, "POST", "/v1/inquiries/"+id+"/claim", tb.op, nil, "")
	notCommand := tb.do(t, "POST", "/v1/inquiries/"+id+"/transitions", tb.op, nil, `{"to":"resolved"}`)
	if refused.status != http.StatusForbidden || accepted.status != http.StatusOK || notCommand.status != http.StatusPreconditionRequired {
		t.Fatalf("statuses %d %d %d", refused.status, accepted.status, notCommand.status)
	}
	acme, err := tb.app.Tenancy.TenantBySlug(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tb.app.Audit.Entries(t.Context(), acme.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	byRequest := map[string]commands.AuditEntry{}
	for _, e := range entries {
		byRequest[e.RequestID] = e
	}
	if e := byRequest[refused.header.Get("X-Request-Id")]; e.Command != "claim" || e.Outcome != commands.OutcomeRefused || e.Code != "forbidden" || string(e.InquiryID) != id {
		t.Errorf("refused claim's entry = %+v", e)
	}
	if e := byRequest[accepted.header.Get("X-Request-Id")]; e.Command != "claim" || e.Outcome != commands.OutcomeAccepted || e.Actor == "" {
		t.Errorf("accepted claim's entry = %+v", e)
	}
	if e, ok := byRequest[notCommand.header.Get("X-Request-Id")]; ok {
		t.Errorf("a request refused before any command was audited: %+v", e)
	}
	if len(entries) != 3 { // the intake, and the two claims
		t.Errorf("%d entries, want 3: %+v", len(entries), entries)
	}
}
