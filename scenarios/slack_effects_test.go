package scenarios

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app/apptest"
)

type effectItem struct {
	ID          int64  `json:"id"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	Disposition string `json:"disposition"`
	Inquiry     string `json:"inquiry_id"`
	Destination string `json:"destination"`
	Attempt     int    `json:"attempt"`
	ErrorClass  string `json:"error_class"`
	LastError   string `json:"last_error"`
}

// TestListDeadLetterRecovery: the real binary, the fake Slack, an active List and
// CASEBOOK_SLACK_MAX_ATTEMPTS=1. Two row updates fail (503) and become dead letters. `casebook
// effects list` and GET /v1/admin/effects both show them with inquiry, destination (the List),
// attempts, last error class and disposition; another tenant's admin sees none and cannot act on
// them. One is retried with `casebook effects retry` and completes (the row shows the newest
// status); the other is cancelled with POST /v1/admin/effects/{id}/cancel and stays listed,
// cancelled. Then the retried one is shown done, over the API too.
func TestListDeadLetterRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Clock: fakeslack.SystemClock()})
	li, err := fake.CreateList("Inquiries", apptest.BoardColumns()...)
	if err != nil {
		t.Fatal(err)
	}
	var tenant, other struct {
		AdminToken string `json:"admin_token"`
	}
	cli(t, dir, &tenant, "tenants", "create", "--slug", "acme")
	cli(t, dir, &other, "tenants", "create", "--slug", "globex")
	var op struct {
		Token string `json:"token"`
	}
	cli(t, dir, &op, "principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator", "--team", "support")
	var inst map[string]any
	cli(t, dir, &inst, "slack", "install", "--tenant", "acme", "--token", fake.Token(), "--signing-secret", "s",
		"--app-id", "A0FAKEAPP01", "--slack-api-url", fake.URL())
	var cfg map[string]any
	cli(t, dir, &cfg, "lists", "activate", "--tenant", "acme", "--list", li.ID, "--clearance", "internal")
	srv := start(t, dir, "CASEBOOK_SLACK_MAX_ATTEMPTS=1")

	if code, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-1",
		adaIntake); err != nil || code != 202 {
		t.Fatalf("intake = %d %v", code, err)
	}
	statusCol := li.ColumnID(lists.ColStatus)
	rowStatus := func(want string) func() bool { return rowStatusIs(fake, li.ID, statusCol, want) }
	eventually(t, "the row", rowStatus("new"))
	id := firstInquiryID(t, srv, op.Token)

	fake.AddRule(fakeslack.Rule{Method: "slackLists.items.update", Fault: fakeslack.HTTPStatus(503), Times: -1})
	listCLI := func(args ...string) []effectItem {
		var out struct {
			Items []effectItem `json:"items"`
		}
		cli(t, dir, &out, append([]string{"effects", "list", "--tenant", "acme", "--kind", lists.SyncArgs{}.Kind()}, args...)...)
		return out.Items
	}
	// One transition at a time: changes that reach the List subscriber in one batch share one job.
	var dead []effectItem
	for v, body := range []string{`{"to":"triaged","priority":"high"}`, `{"to":"in_progress"}`} {
		if code, res, err := srv.doIfMatch("POST", "/v1/inquiries/"+id+"/transitions", op.Token, fmt.Sprint(v+1), body); err != nil || code != 200 {
			t.Fatalf("transition = %d %v %v", code, res, err)
		}
		eventually(t, fmt.Sprint(v+1, " dead letters"), func() bool {
			dead = listCLI("--state", "discarded")
			return len(dead) == v+1
		})
	}
	for _, e := range dead {
		if e.Disposition != "dead_letter" || e.Inquiry != id || e.Destination != li.ID || e.Attempt != 1 ||
			e.ErrorClass != "unknown_result" || e.LastError == "" || e.Kind != "slack_list_row_sync" {
			t.Fatalf("dead letter (CLI) = %+v", e)
		}
	}
	apiList := func(token, query string) []any {
		code, body, err := srv.do("GET", "/v1/admin/effects"+query, token, "", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /v1/admin/effects%s = %d %v %v", query, code, body, err)
		}
		items, _ := body["items"].([]any)
		return items
	}
	res, err := http.Get(srv.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !strings.Contains(string(metrics), `casebook_slack_effects{disposition="dead",kind="slack_list_row_sync"} 2`) {
		t.Fatalf("metrics lack the two List dead letters: %v\n%s", err, metrics)
	}
	api := apiList(tenant.AdminToken, "?state=discarded&kind=slack_list_row_sync&inquiry="+id)
	if len(api) != 2 {
		t.Fatalf("admin API dead letters = %v", api)
	}
	for i, it := range api {
		m := it.(map[string]any)
		if int64(m["id"].(float64)) != dead[i].ID || m["disposition"] != "dead_letter" || m["destination"] != li.ID ||
			m["error_class"] != "unknown_result" || m["attempt"].(float64) != 1 {
			t.Fatalf("admin API dead letter = %v, CLI %+v", m, dead[i])
		}
	}
	if n := len(apiList(other.AdminToken, "")); n != 0 {
		t.Fatalf("another tenant sees %d effects", n)
	}
	if code, _, _ := srv.do("GET", "/v1/admin/effects?kind=nope", tenant.AdminToken, "", ""); code != http.StatusUnprocessableEntity {
		t.Fatalf("unknown kind = %d, want 422", code)
	}
	retried, cancelled := dead[0], dead[1]
	if code, _, _ := srv.do("POST", fmt.Sprintf("/v1/admin/effects/%d/cancel", cancelled.ID), other.AdminToken, "", ""); code != http.StatusNotFound {
		t.Fatalf("another tenant's cancel = %d, want 404", code)
	}

	fake.ClearFaults()
	var r effectItem
	cli(t, dir, &r, "effects", "retry", "--tenant", "acme", "--id", fmt.Sprint(retried.ID))
	if r.ID != retried.ID || (r.State != "available" && r.State != "running" && r.State != "completed") {
		t.Fatalf("retry = %+v", r)
	}
	eventually(t, "the row in progress", rowStatus("in_progress"))
	code, body, err := srv.do("POST", fmt.Sprintf("/v1/admin/effects/%d/cancel", cancelled.ID), tenant.AdminToken, "", "")
	if err != nil || code != http.StatusOK || body["state"] != "cancelled" {
		t.Fatalf("cancel = %d %v %v", code, body, err)
	}
	if c := listCLI("--state", "cancelled"); len(c) != 1 || c[0].ID != cancelled.ID || c[0].Disposition != "cancelled" {
		t.Fatalf("cancelled (CLI) = %+v", c)
	}
	eventually(t, "the retried effect done", func() bool {
		for _, it := range apiList(tenant.AdminToken, "?state=completed&inquiry="+id) {
			if m := it.(map[string]any); int64(m["id"].(float64)) == retried.ID && m["disposition"] == "done" {
				return true
			}
		}
		return false
	})
	if n := len(listCLI("--state", "discarded")); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
}

// TestBurstOverHTTPCostsOneUpdateAndOneReply: the real binary with its default debounce (quiet
// 2 s, maximum delay 15 s) and the fake Slack. After the root is posted, 20 transitions within about
// three seconds over HTTP cost one root update and one reply, which show the final version. The
// counts are logged; the assertion is the bound.
func TestBurstOverHTTPCostsOneUpdateAndOneReply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ch = "C0OPS000001"
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{ch}, Clock: fakeslack.SystemClock()})
	op := slackTenantWithOperator(t, dir, fake, "s")
	var inst map[string]any
	cli(t, dir, &inst, "slack", "destination", "--tenant", "acme", "--channel", ch, "--clearance", "internal")
	srv := start(t, dir)
	if code, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-1",
		adaIntake); err != nil || code != 202 {
		t.Fatalf("intake = %d %v", code, err)
	}
	eventually(t, "the root message", func() bool { return len(fake.Messages(ch)) == 1 })
	id := firstInquiryID(t, srv, op.Token)
	updates, posts := fake.CallCount("chat.update"), fake.CallCount("chat.postMessage")

	bodies := []string{`{"to":"triaged","priority":"high"}`, `{"to":"in_progress"}`}
	for len(bodies) < 20 {
		bodies = append(bodies, `{"to":"waiting","reason":"asked the customer"}`, `{"to":"in_progress"}`)
	}
	pace := time.NewTicker(140 * time.Millisecond) // 20 transitions in about three seconds
	defer pace.Stop()
	began := time.Now()
	for v, body := range bodies {
		<-pace.C
		if code, res, err := srv.doIfMatch("POST", "/v1/inquiries/"+id+"/transitions", op.Token, fmt.Sprint(v+1), body); err != nil || code != 200 {
			t.Fatalf("transition %d = %d %v %v", v+1, code, res, err)
		}
	}
	burst := time.Since(began)
	eventually(t, "the thread at version 21", func() bool {
		m := fake.Messages(ch)
		return len(m) == 1 && len(m[0].Replies) >= 1 && strings.Contains(m[0].Replies[len(m[0].Replies)-1].Text, "version 21")
	})
	eventually(t, "slack synced on the detail", func() bool {
		_, d, err := srv.do("GET", "/v1/inquiries/"+id, op.Token, "", "")
		sl, _ := d["slack"].(map[string]any)
		return err == nil && sl["state"] == "synced"
	})
	du, dp := fake.CallCount("chat.update")-updates, fake.CallCount("chat.postMessage")-posts
	replies := len(fake.Messages(ch)[0].Replies)
	t.Logf("20 transitions over HTTP in %s: %d root updates, %d replies (chat.postMessage %d)", burst.Round(time.Millisecond), du, replies, dp)
	if du > 1 || replies > 1 || dp > 1 {
		t.Fatalf("burst cost %d root updates and %d replies (%d posts), want at most one of each", du, replies, dp)
	}
}
