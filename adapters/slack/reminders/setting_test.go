package reminders_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/httptestclient"
)

// TestEscalationDestinationSettingAudited: the admin route sets, reads and clears the tenant's
// escalation destination; operators are refused; a bad clearance or channel is 422 naming the
// field; another tenant's admin sees none; every change is an audit event naming the admin.
func TestEscalationDestinationSettingAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, apptest.Backends[0].Config(t), "internal")
	ctx := t.Context()
	ann, annTok, err := b.app.Tenancy.CreatePrincipal(ctx, "acme", "Ann", domain.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	_, opTok, err := b.app.Tenancy.CreatePrincipal(ctx, "acme", "Otto", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	_, _, otherTok, err := b.app.Tenancy.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.app.Handler())
	defer srv.Close()
	call := func(method, token, body string) (int, map[string]any) {
		t.Helper()
		return httptestclient.Client{Base: srv.URL}.Call(t, httptestclient.Request{Method: method, Path: "/v1/admin/slack/escalation",
			Token: token, Body: body})
	}
	if code, _ := call("GET", annTok, ""); code != http.StatusNotFound {
		t.Fatalf("none set: %d", code)
	}
	if code, _ := call("PUT", opTok, `{"channel":"C0ONCALL001","clearance":"internal"}`); code != http.StatusForbidden {
		t.Fatalf("operator: %d", code)
	}
	for body, field := range map[string]string{`{"channel":"C0ONCALL001","clearance":"secret"}`: "clearance", `{"channel":"#oncall","clearance":"internal"}`: "channel"} {
		if code, m := call("PUT", annTok, body); code != http.StatusUnprocessableEntity || m["error"].(map[string]any)["field"] != field {
			t.Fatalf("%s: %d %v", body, code, m)
		}
	}
	if code, m := call("PUT", annTok, `{"channel":"C0ONCALL001","clearance":"public"}`); code != http.StatusOK || m["channel"] != "C0ONCALL001" || m["clearance"] != "public" {
		t.Fatalf("set: %d %v", code, m)
	}
	if code, m := call("GET", annTok, ""); code != http.StatusOK || m["channel"] != "C0ONCALL001" {
		t.Fatalf("get: %d %v", code, m)
	}
	if code, _ := call("GET", otherTok, ""); code != http.StatusNotFound {
		t.Fatalf("another tenant's admin: %d", code)
	}
	if code, _ := call("DELETE", annTok, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code, _ := call("GET", annTok, ""); code != http.StatusNotFound {
		t.Fatalf("after delete: %d", code)
	}
	evs, err := b.app.Store.ReadStream(ctx, slackinstall.InstallationStream(b.tenant), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var audit []slackinstall.SlackEscalationDestinationSet
	for _, e := range evs {
		if e.Type == "SlackEscalationDestinationSet" {
			var ev slackinstall.SlackEscalationDestinationSet
			if err := json.Unmarshal(e.Data, &ev); err != nil {
				t.Fatal(err)
			}
			audit = append(audit, ev)
		}
	}
	if len(audit) != 2 || audit[0].By != string(ann.ID) || audit[0].Channel != "C0ONCALL001" || !audit[1].Cleared || audit[1].By != string(ann.ID) {
		t.Fatalf("audit events = %+v", audit)
	}
}
