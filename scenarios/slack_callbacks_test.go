package scenarios

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
)

// TestSlackCallbacksScenario: the real binary with the fake Slack and an activated List: an
// inquiry's root message (with its buttons) is claimed and resolved by signed button clicks of a
// linked Slack user; the answers arrive on response_url; the thread, the List row (in progress,
// then removed after the delay) and the query API show the result.
func TestSlackCallbacksScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ch, secret = "C0OPS000001", "scenario-signing-secret"
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{ch}, Clock: fakeslack.SystemClock()})
	var st []string
	for _, s := range domain.Statuses {
		st = append(st, string(s))
	}
	li, err := fake.CreateList("Inquiries",
		fakeslack.Column{Key: lists.ColReceipt, Type: "text", Primary: true},
		fakeslack.Column{Key: lists.ColMarker, Type: "text"},
		fakeslack.Column{Key: lists.ColStatus, Type: "select", Choices: st},
		fakeslack.Column{Key: lists.ColPriority, Type: "select", Choices: []string{"low", "normal", "high", "urgent"}},
		fakeslack.Column{Key: lists.ColTeam, Type: "text"})
	if err != nil {
		t.Fatal(err)
	}
	replies := make(chan string, 16)
	resp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text string `json:"text"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		replies <- m.Text
	}))
	t.Cleanup(resp.Close)
	op := slackTenantWithOperator(t, dir, fake, secret)
	var out map[string]any
	cli(t, dir, &out, "slack", "destination", "--tenant", "acme", "--channel", ch, "--clearance", "internal")
	cli(t, dir, &out, "slack", "link-user", "--tenant", "acme", "--slack-user", "U0OLGA0001", "--principal", op.PrincipalID)
	cli(t, dir, &out, "lists", "activate", "--tenant", "acme", "--list", li.ID, "--clearance", "internal", "--remove-after", "2s")
	if out["state"] != "active" {
		t.Fatalf("lists activate = %v", out)
	}
	statusCol := li.ColumnID(lists.ColStatus)
	rowStatus := func(want string) func() bool { return rowStatusIs(fake, li.ID, statusCol, want) }
	srv := start(t, dir, "CASEBOOK_SLACK_RESPONSE_URL_PREFIX="+resp.URL+"/")
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range fake.Rows(li.ID) {
				t.Logf("row status %v", r.Strings(statusCol))
			}
			for _, c := range fake.Calls() {
				if c.ListID != "" {
					t.Logf("call %d %s %d %q fault=%v", c.Seq, c.Method, c.Status, c.Error, c.Fault)
				}
			}
			for _, m := range fake.Messages(ch) {
				t.Logf("root %q edited=%q replies=%d", m.Text, m.EditedTS, len(m.Replies))
				for _, r := range m.Replies {
					t.Logf("  reply %q", r.Text)
				}
			}
		}
	})

	status, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-1",
		adaIntake)
	if err != nil || status != 202 {
		t.Fatalf("intake = %d %v", status, err)
	}
	id := firstInquiryID(t, srv, op.Token)
	detail := func() map[string]any {
		_, d, err := srv.do("GET", "/v1/inquiries/"+id+"?consistent=true", op.Token, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	eventually(t, "the root message mapped", func() bool {
		sl, _ := detail()["slack"].(map[string]any)
		return sl["state"] == "synced"
	})
	rootTS := fake.Messages(ch)[0].TS
	for _, a := range []string{callbacks.ActionClaim, callbacks.ActionAssignMe, callbacks.ActionStatus, callbacks.ActionNote, callbacks.ActionAssign, callbacks.ActionCancel} {
		if !strings.Contains(string(fake.Messages(ch)[0].Blocks), `"action_id":"`+a+`"`) {
			t.Fatalf("root message lacks %s: %s", a, fake.Messages(ch)[0].Blocks)
		}
	}
	eventually(t, "the List row", rowStatus("new"))

	clickButton := func(action string, n int) {
		t.Helper()
		payload := fmt.Sprintf(`{"type":"block_actions","team":{"id":"T0FAKETEAM1"},"api_app_id":"A0FAKEAPP01","user":{"id":"U0OLGA0001"},
			"channel":{"id":%q},"message":{"ts":%q},"response_url":%q,
			"actions":[{"action_id":%q,"value":"CB-ANY","action_ts":"1700000000.00000%d"}]}`, ch, rootTS, resp.URL+"/actions/1", action, n)
		body := "payload=" + url.QueryEscape(payload)
		req, err := http.NewRequest(http.MethodPost, srv.base+"/slack/interactions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", callbacks.SignatureHeader(secret, ts, []byte(body)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s click = %d", action, res.StatusCode)
		}
	}
	next := func() string {
		select {
		case r := <-replies:
			return r
		case <-time.After(60 * time.Second):
			t.Fatal("no answer on response_url")
			return ""
		}
	}
	clickButton(callbacks.ActionClaim, 1)
	if r := next(); r != "You claimed this inquiry." {
		t.Fatalf("claim answer = %q", r)
	}
	eventually(t, "the List row in progress", rowStatus("in_progress"))
	clickButton(callbacks.ActionResolve, 2)
	if r := next(); r != "Moved to resolved." {
		t.Fatalf("resolve answer = %q", r)
	}
	d := detail()
	if d["status"] != "resolved" || d["owner"] != op.PrincipalID {
		t.Fatalf("detail = status %v owner %v", d["status"], d["owner"])
	}
	eventually(t, "the thread shows resolved", func() bool {
		m := fake.Messages(ch)
		return len(m) == 1 && strings.Contains(m[0].Text, "resolved") && len(m[0].Replies) >= 1 &&
			strings.Contains(m[0].Replies[len(m[0].Replies)-1].Text, "resolved")
	})
	eventually(t, "the List row removed after the delay", func() bool { return len(fake.Rows(li.ID)) == 0 })
	// A captured click replayed after the signature window is refused.
	payload := "payload=%7B%7D"
	req, _ := http.NewRequest(http.MethodPost, srv.base+"/slack/interactions", strings.NewReader(payload))
	old := strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)
	req.Header.Set("X-Slack-Request-Timestamp", old)
	req.Header.Set("X-Slack-Signature", callbacks.SignatureHeader(secret, old, []byte(payload)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired request = %d", res.StatusCode)
	}
}
