package threads_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/httptestclient"
)

func call(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	return httptestclient.Client{Base: srv.URL}.Call(t, httptestclient.Request{Method: method, Path: path, Token: token, Body: body})
}

// TestSlackOutageNeverFailsIntake: while the fake answers 5xx to everything, intake answers 202;
// the detail API shows "saved; Slack failed" and the admin effect routes show the job to its own
// tenant only, and retry it.
func TestSlackOutageNeverFailsIntake(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, be.Config(t), "internal")
			ctx := t.Context()
			_, _, adminToken, err := b.app.Tenancy.CreateTenant(ctx, "other")
			if err != nil {
				t.Fatal(err)
			}
			_, opToken, err := b.app.Tenancy.CreatePrincipal(ctx, "acme", "Ann", domain.RoleAdmin, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"chat.postMessage", "chat.update", "conversations.history", "auth.test"} {
				b.fake.AddRule(fakeslack.Rule{Method: m, Fault: fakeslack.HTTPStatus(503), Times: -1})
			}
			srv := httptest.NewServer(b.app.Handler())
			defer srv.Close()
			status, body := call(t, srv, "POST", "/v1/public/acme/inquiries", "",
				`{"name":"Ada","email":"ada@example.com","subject":"Help","message":"Hi","category":"billing"}`)
			if status != http.StatusAccepted {
				t.Fatalf("intake during a Slack outage = %d %v", status, body)
			}
			b.project(t)
			errs := b.work(t)
			if len(errs) != 1 || errs[0] == nil {
				t.Fatalf("work = %v, want one failure", errs)
			}
			_, list := call(t, srv, "GET", "/v1/inquiries", opToken, "")
			id := list["items"].([]any)[0].(map[string]any)["id"].(string)
			_, detail := call(t, srv, "GET", "/v1/inquiries/"+id, opToken, "")
			sl, _ := detail["slack"].(map[string]any)
			if sl["state"] != "failed" || detail["status"] != "new" {
				t.Fatalf("detail = %v", detail)
			}
			status, effects := call(t, srv, "GET", "/v1/admin/effects", opToken, "")
			items, _ := effects["items"].([]any)
			if status != 200 || len(items) != 1 {
				t.Fatalf("effects = %d %v", status, effects)
			}
			jobID := int64(items[0].(map[string]any)["id"].(float64))
			_, other := call(t, srv, "GET", "/v1/admin/effects", adminToken, "")
			if n := len(other["items"].([]any)); n != 0 {
				t.Fatalf("another tenant sees %d effects", n)
			}
			path := "/v1/admin/effects/" + jsonNum(jobID) + "/retry"
			if status, _ := call(t, srv, "POST", path, adminToken, ""); status != http.StatusNotFound {
				t.Fatalf("another tenant's retry = %d, want 404", status)
			}
			if status, body := call(t, srv, "POST", path, opToken, ""); status != http.StatusOK || body["state"] != "available" {
				t.Fatalf("retry = %d %v", status, body)
			}
		})
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }
