package httpapi_test

import (
	"fmt"
	"testing"
	"time"
)

// waitSchedules waits until the schedules subscriber has applied every write so far.
func (tb *testBundle) waitSchedules(t *testing.T) {
	t.Helper()
	head, err := tb.app.Store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.app.Schedules().WaitFor(t.Context(), head); err != nil {
		t.Fatal(err)
	}
}

// TestDueRoutes: follow-ups, due dates, watchers, routing, the SLA policy and the due-job admin
// routes validate their input, fail closed across roles and tenants, and show in the detail.
func TestDueRoutes(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r := tb.do(t, "POST", "/v1/public/acme/inquiries", "", map[string]string{"Idempotency-Key": "d1"},
		`{"email":"ada@example.com","subject":"Invoice","message":"Twice."}`)
	if r.status != 202 {
		t.Fatalf("intake %d", r.status)
	}
	list := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.op, nil, "")
	id := list.body["items"].([]any)[0].(map[string]any)["id"].(string)
	base := "/v1/inquiries/" + id

	// SLA policy: admins only, strict.
	policy := `{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","17:00"]},"targets":{"normal":{"first_response":"1h"}}}`
	for _, c := range []struct {
		token, body string
		want        int
	}{
		{tb.op, policy, 403},
		{tb.admin, `{"time_zone":"Mars/Base","targets":{"normal":{"resolution":"1h"}}}`, 422},
		{tb.admin, `{"time_zone":"UTC","targets":{"normal":{"resolution":"1h"}},"surprise":1}`, 422},
		{tb.admin, policy, 200},
	} {
		if r := tb.do(t, "PUT", "/v1/admin/sla-policy", c.token, nil, c.body); r.status != c.want {
			t.Fatalf("PUT sla-policy %s: %d %s, want %d", c.body, r.status, r.raw, c.want)
		}
	}
	if r := tb.do(t, "GET", "/v1/admin/sla-policy", tb.admin, nil, ""); r.status != 200 || r.body["time_zone"] != "Europe/Berlin" {
		t.Fatalf("GET sla-policy %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/admin/sla-policy", tb.other, nil, ""); r.status != 404 {
		t.Fatalf("another tenant's policy: %d", r.status)
	}

	// Follow-ups.
	for _, c := range []struct {
		token, body string
		want        int
	}{
		{tb.viewer, `{"in":"2h"}`, 403},
		{tb.other, `{"in":"2h"}`, 404},
		{tb.op, `{"at":"tomorrow"}`, 422},
		{tb.op, `{"in":"-5m"}`, 422},
		{tb.op, `{"at":"2020-01-01T00:00:00Z"}`, 422},
		{tb.op, `{"in":"2h","at":"2030-01-01T00:00:00Z"}`, 422},
		{tb.op, `{}`, 422},
		{tb.op, `{"in":"2h","extra":1}`, 400},
	} {
		if r := tb.do(t, "POST", base+"/follow-ups", c.token, nil, c.body); r.status != c.want {
			t.Fatalf("follow-up %s: %d %s, want %d", c.body, r.status, r.raw, c.want)
		}
	}
	fu := tb.do(t, "POST", base+"/follow-ups", tb.op, map[string]string{"Idempotency-Key": "fu1"}, `{"in":"2h","note":"call back"}`)
	if fu.status != 201 || fu.body["job_id"] == "" || fu.body["due_at"] == "" {
		t.Fatalf("follow-up: %d %s", fu.status, fu.raw)
	}
	jobID := fu.body["job_id"].(string)

	// Due date, watchers, routing.
	due := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	if r := tb.do(t, "POST", base+"/due", tb.op, nil, `{"due_at":"not a time"}`); r.status != 422 {
		t.Fatalf("bad due date: %d", r.status)
	}
	if r := tb.do(t, "POST", base+"/due", tb.op, nil, `{}`); r.status != 422 {
		t.Fatalf("missing due date: %d", r.status)
	}
	if r := tb.do(t, "POST", base+"/due", tb.op, nil, fmt.Sprintf(`{"due_at":%q}`, due.Format(time.RFC3339))); r.status != 200 {
		t.Fatalf("due date: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "POST", base+"/watchers", tb.op, nil, `{"principal":"nobody"}`); r.status != 422 {
		t.Fatalf("unknown watcher: %d", r.status)
	}
	if r := tb.do(t, "POST", base+"/watchers", tb.op, nil, fmt.Sprintf(`{"principal":%q}`, tb.opID)); r.status != 200 {
		t.Fatalf("watcher: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "POST", base+"/team", tb.op, nil, `{"team":"Billing Team"}`); r.status != 422 {
		t.Fatalf("bad team: %d", r.status)
	}
	last := tb.do(t, "POST", base+"/team", tb.op, nil, `{"team":"billing"}`)
	if last.status != 200 {
		t.Fatalf("route: %d %s", last.status, last.raw)
	}
	tb.waitSchedules(t)

	// The detail shows the clock and the pending jobs.
	d := tb.do(t, "GET", base+"?min_position="+last.header.Get("Casebook-Position"), tb.viewer, nil, "")
	sla, _ := d.body["sla"].(map[string]any)
	if d.status != 200 || sla == nil || sla["due_at"] != due.Format(time.RFC3339) || sla["team"] != "billing" ||
		fmt.Sprint(sla["watchers"]) != "["+tb.opID+"]" || sla["next_follow_up_at"] == nil {
		t.Fatalf("detail sla: %d %v", d.status, d.body["sla"])
	}
	if d.body["team"] != "billing" {
		t.Fatalf("detail team %v", d.body["team"])
	}
	jobs, _ := d.body["pending_jobs"].([]any)
	if len(jobs) != 1 || jobs[0].(map[string]any)["id"] != jobID || jobs[0].(map[string]any)["kind"] != "follow_up" {
		t.Fatalf("pending jobs %v", d.body["pending_jobs"])
	}

	// List filters.
	for q, want := range map[string]int{
		"due_before=" + due.Add(time.Hour).Format(time.RFC3339): 1, "due_before=" + due.Add(-time.Hour).Format(time.RFC3339): 0,
		"breached=true": 0, "breached=false": 1, "team=billing": 1, "team=support": 0,
	} {
		r := tb.do(t, "GET", "/v1/inquiries?"+q, tb.op, nil, "")
		if items, _ := r.body["items"].([]any); r.status != 200 || len(items) != want {
			t.Fatalf("list %s: %d, %d items, want %d", q, r.status, len(items), want)
		}
	}
	if r := tb.do(t, "GET", "/v1/inquiries?breached=maybe", tb.op, nil, ""); r.status != 422 {
		t.Fatalf("breached=maybe: %d", r.status)
	}

	// Due-job admin routes.
	if r := tb.do(t, "GET", "/v1/admin/due-jobs?state=pending", tb.op, nil, ""); r.status != 403 {
		t.Fatalf("operator lists due jobs: %d", r.status)
	}
	if r := tb.do(t, "GET", "/v1/admin/due-jobs?state=sleeping", tb.admin, nil, ""); r.status != 422 {
		t.Fatalf("bad state: %d", r.status)
	}
	if r := tb.do(t, "GET", "/v1/admin/due-jobs?state=pending", tb.admin, nil, ""); r.status != 200 || len(r.body["items"].([]any)) != 1 {
		t.Fatalf("list due jobs: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/admin/due-jobs", tb.other, nil, ""); r.status != 200 || len(r.body["items"].([]any)) != 0 {
		t.Fatalf("another tenant's jobs: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "GET", "/v1/admin/due-jobs/"+jobID, tb.other, nil, ""); r.status != 404 {
		t.Fatalf("another tenant's job: %d", r.status)
	}
	if r := tb.do(t, "POST", "/v1/admin/due-jobs/"+jobID+"/cancel", tb.admin, nil, `{"reason":""}`); r.status != 422 {
		t.Fatalf("review without reason: %d", r.status)
	}
	if r := tb.do(t, "POST", "/v1/admin/due-jobs/"+jobID+"/resolve", tb.admin, nil, `{"reason":"phoned the customer"}`); r.status != 200 || r.body["state"] != "resolved" {
		t.Fatalf("resolve: %d %s", r.status, r.raw)
	}
	g := tb.do(t, "GET", "/v1/admin/due-jobs/"+jobID, tb.admin, nil, "")
	hist, _ := g.body["history"].([]any)
	if g.status != 200 || len(hist) != 1 || hist[0].(map[string]any)["detail"] != "phoned the customer" || hist[0].(map[string]any)["action"] != "resolve" {
		t.Fatalf("history: %d %s", g.status, g.raw)
	}

	// Cancelling the follow-up itself: once, then 404.
	if r := tb.do(t, "DELETE", base+"/follow-ups/"+jobID, tb.op, nil, ""); r.status != 200 {
		t.Fatalf("cancel follow-up: %d %s", r.status, r.raw)
	}
	if r := tb.do(t, "DELETE", base+"/follow-ups/"+jobID, tb.op, nil, ""); r.status != 404 {
		t.Fatalf("cancel again: %d", r.status)
	}
}
