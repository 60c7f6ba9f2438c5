package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// parkOne appends an event no handler understands to one of acme's inquiries, so the query model
// parks that stream, and returns the stream name.
func (tb *testBundle) parkOne(t *testing.T) string {
	t.Helper()
	_, id := tb.submit(t, "poison")
	tenant, err := tb.app.Tenancy.TenantBySlug(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	stream := eventstore.InquiryStream(tenant.ID, domain.InquiryID(id))
	meta, _ := json.Marshal(domain.Metadata{TenantID: tenant.ID, Actor: "x", SchemaVersion: 1})
	if _, err := tb.app.Store.Append(t.Context(), stream, eventstore.Exact(0), []eventstore.EventData{{
		ID: eventstore.DeterministicID("poison", 0), Type: "FromTheFuture", Data: []byte(`{}`), Metadata: meta,
	}}); err != nil {
		t.Fatal(err)
	}
	if r := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.admin, nil, ""); r.status != 200 {
		t.Fatalf("consistent read: %s", r.raw)
	}
	return stream
}

// TestAdminProjections: admins see subscriber health and their own tenant's parked streams, and
// release them; other roles and other tenants cannot.
func TestAdminProjections(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	stream := tb.parkOne(t)

	r := tb.do(t, "GET", "/v1/admin/projections", tb.admin, nil, "")
	if r.status != 200 {
		t.Fatalf("projections = %d %s", r.status, r.raw)
	}
	st := r.body["items"].([]any)[0].(map[string]any)
	if st["name"] != "querymodel" || st["parked"] != 1.0 || st["owner"] != true || st["state"] != "running" {
		t.Fatalf("status = %v", st)
	}
	// Another tenant's admin sees none of acme's parked streams, and nobody sees log positions, event
	// counts or errors, which describe every tenant's writes.
	other := tb.do(t, "GET", "/v1/admin/projections", tb.other, nil, "")
	if st := other.body["items"].([]any)[0].(map[string]any); st["parked"] != 0.0 {
		t.Fatalf("globex's status = %v", st)
	}
	for _, leak := range []string{"position", "head", "processed", "lag_events", "last_error", stream} {
		if strings.Contains(r.raw, `"`+leak+`"`) || strings.Contains(other.raw, leak) {
			t.Errorf("projection statuses carry %q: %s", leak, other.raw)
		}
	}
	for _, tok := range []string{tb.op, tb.viewer} {
		if r := tb.do(t, "GET", "/v1/admin/projections", tok, nil, ""); r.status != 403 {
			t.Fatalf("non-admin = %d", r.status)
		}
	}
	if r := tb.do(t, "GET", "/v1/admin/projections", "", nil, ""); r.status != 401 {
		t.Fatalf("anonymous = %d", r.status)
	}

	mine := tb.do(t, "GET", "/v1/admin/projections/querymodel/parked", tb.admin, nil, "")
	if items := mine.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["stream"] != stream {
		t.Fatalf("acme parked = %s", mine.raw)
	}
	theirs := tb.do(t, "GET", "/v1/admin/projections/querymodel/parked", tb.other, nil, "")
	if items := theirs.body["items"].([]any); len(items) != 0 {
		t.Fatalf("globex sees acme's parked streams: %s", theirs.raw)
	}
	body := `{"stream":"` + stream + `"}`
	if r := tb.do(t, "POST", "/v1/admin/projections/querymodel/parked/skip", tb.other, nil, body); r.status != 404 {
		t.Fatalf("globex skips acme's stream: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/admin/projections/nope/parked", tb.admin, nil, ""); r.status != 404 {
		t.Fatalf("unknown projection: %d", r.status)
	}
	// Retrying does not help an event no code understands; skipping releases the stream.
	if r := tb.do(t, "POST", "/v1/admin/projections/querymodel/parked/retry", tb.admin, nil, body); r.status != 200 || r.body["released"] != false {
		t.Fatalf("retry = %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "POST", "/v1/admin/projections/querymodel/parked/skip", tb.admin, nil, body); r.status != 200 || r.body["released"] != true {
		t.Fatalf("skip = %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "POST", "/v1/admin/projections/querymodel/parked/skip", tb.admin, nil, body); r.status != 404 {
		t.Fatalf("skip of a released stream = %d", r.status)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.submit(t, "k")
	r := tb.do(t, "GET", "/metrics", "", nil, "")
	for _, want := range []string{`casebook_projection_lag_events{projection="querymodel"}`, `casebook_projection_owner{projection="querymodel"} 1`,
		`casebook_http_requests_total{method="POST",route="/v1/public/{tenant_slug}/inquiries",status="2xx"} 1`} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(r.raw, "ada@example.com") {
		t.Error("metrics carry personal data")
	}
}
