package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
)

// TestReadmeConnectSlack runs docs/slack.md's "Connect a real Slack workspace" blocks, as written,
// against the real binary and the strict fake Slack (non-Marketplace history limits on): manifest
// → install → (the bot is invited) → destination → link user → lists create → intake; then it
// plays Slack's user: the thread and the List row appear, the linked user claims with the root
// message's button, adds a note through the modal (views.open on a fresh trigger id) and
// resolves; the thread, the List row and the query API follow.
func TestReadmeConnectSlack(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the Slack setup blocks need %s, which is not installed", tool)
		}
	}
	readme, err := os.ReadFile("../docs/slack.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- connect-slack (\\d)[^>]*-->\n```sh\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) != 2 || string(blocks[0][1]) != "1" || string(blocks[1][1]) != "2" {
		t.Fatalf("docs/slack.md has %d connect-slack blocks, want blocks 1 and 2", len(blocks))
	}

	dir := t.TempDir()
	const ch, user, secret = "C0OPS000001", "U0OLGA0001", "connect-signing-secret"
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Clock: fakeslack.SystemClock(), NonMarketplace: true})
	fake.AddChannelWithoutBot(ch)
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

	// The walk-through's tenant and operator.
	var tenant struct {
		AdminToken string `json:"admin_token"`
	}
	cli(t, dir, &tenant, "tenants", "create", "--slug", "acme")
	var op struct {
		Token       string `json:"token"`
		PrincipalID string `json:"principal_id"`
	}
	cli(t, dir, &op, "principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator", "--team", "support")
	appEnv := []string{"CASEBOOK_SLACK_SIGNING_SECRET=" + secret, "CASEBOOK_SLACK_API_URL=" + fake.URL(), "CASEBOOK_PUBLIC_URL=https://casebook.example"}
	srv := start(t, dir, append(appEnv, "CASEBOOK_SLACK_RESPONSE_URL_PREFIX="+resp.URL+"/")...)

	run := func(block []byte) string {
		t.Helper()
		work := t.TempDir()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", string(block))
		cmd.Dir = work
		cmd.Env = append(os.Environ(), append(appEnv, "BASE="+srv.base, "CASEBOOK="+binary, "CASEBOOK_DATA_DIR="+dir,
			"SLACK_BOT_TOKEN="+fake.Token(), "SLACK_CHANNEL="+ch, "SLACK_USER="+user, "PRINCIPAL="+op.PrincipalID)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docs/slack.md block failed: %v\n%s", err, out)
		}
		return string(out)
	}
	out := run(blocks[0][2])
	for _, want := range []string{"https://casebook.example/slack/events", "https://casebook.example/slack/interactions", "T0FAKETEAM1", "A0FAKEAPP01"} {
		if !strings.Contains(out, want) {
			t.Fatalf("block 1 output lacks %q:\n%s", want, out)
		}
	}
	// In Slack: /invite @Casebook in the channel.
	fake.InviteBot(ch)
	out = run(blocks[1][2])
	for _, want := range []string{"bot is a member", "active", user, `"status":"received"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("block 2 output lacks %q:\n%s", want, out)
		}
	}
	all := fake.Lists()
	if len(all) != 1 || all[0].Name != "Acme inquiries" {
		t.Fatalf("Lists in Slack: %+v", all)
	}
	li := all[0]
	if acc := fake.ListAccess(li.ID); acc[user] != "owner" || acc[ch] != "read" {
		t.Fatalf("List access = %v", acc)
	}
	statusCol := li.ColumnID(lists.ColStatus)
	rowStatus := func(want string) func() bool { return rowStatusIs(fake, li.ID, statusCol, want) }

	id := firstInquiryID(t, srv, op.Token)
	detail := func() map[string]any {
		_, d, err := srv.do("GET", "/v1/inquiries/"+id+"?consistent=true", op.Token, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	eventually(t, "the thread in the channel, mapped", func() bool {
		sl, _ := detail()["slack"].(map[string]any)
		return sl["state"] == "synced" && len(fake.Messages(ch)) == 1
	})
	eventually(t, "the row in the List", rowStatus("new"))
	rootTS := fake.Messages(ch)[0].TS

	post := func(payload string) *http.Response {
		t.Helper()
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
		return res
	}
	click := func(action string, n int, trigger string) {
		t.Helper()
		res := post(fmt.Sprintf(`{"type":"block_actions","team":{"id":"T0FAKETEAM1"},"api_app_id":"A0FAKEAPP01","user":{"id":%q},
			"channel":{"id":%q},"container":{"type":"message","channel_id":%q,"message_ts":%q},"message":{"ts":%q},"trigger_id":%q,
			"response_url":%q,"actions":[{"action_id":%q,"block_id":"casebook_actions","value":"CB-ANY","action_ts":"%d.00000%d"}]}`,
			user, ch, ch, rootTS, rootTS, trigger, resp.URL+"/actions/1", action, time.Now().Unix(), n))
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

	click(callbacks.ActionClaim, 1, "trig.unused.1")
	if r := next(); r != "You claimed this inquiry." {
		t.Fatalf("claim answer = %q", r)
	}
	eventually(t, "the List row in progress", rowStatus("in_progress"))

	// Add note: Slack issues a trigger id with the click; the modal opens within its 3 seconds.
	click(callbacks.ActionNote, 2, fake.IssueTrigger())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	views, err := fake.WaitViews(ctx, 1)
	if err != nil || views[0].CallbackID != callbacks.ModalNote {
		t.Fatalf("note modal: %+v, %v", views, err)
	}
	res := post(fmt.Sprintf(`{"type":"view_submission","team":{"id":"T0FAKETEAM1"},"api_app_id":"A0FAKEAPP01","user":{"id":%q},
		"view":{"id":%q,"callback_id":%q,"private_metadata":%q,"state":{"values":{"note":{"note":{"value":"Called Ada back"}}}}}}`,
		user, views[0].ID, views[0].CallbackID, views[0].PrivateMetadata))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("note submission = %d", res.StatusCode)
	}
	eventually(t, "the note in the timeline", func() bool {
		_, tl, err := srv.do("GET", "/v1/inquiries/"+id+"/timeline?consistent=true", op.Token, "", "")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(tl)
		return strings.Contains(string(b), "NoteAdded")
	})

	click(callbacks.ActionResolve, 3, "trig.unused.3")
	if r := next(); r != "Moved to resolved." {
		t.Fatalf("resolve answer = %q", r)
	}
	if d := detail(); d["status"] != "resolved" || d["owner"] != op.PrincipalID {
		t.Fatalf("detail = status %v owner %v", d["status"], d["owner"])
	}
	eventually(t, "the thread shows resolved", func() bool {
		m := fake.Messages(ch)
		return len(m) == 1 && strings.Contains(m[0].Text, "resolved") && len(m[0].Replies) >= 1 &&
			strings.Contains(m[0].Replies[len(m[0].Replies)-1].Text, "resolved")
	})
	eventually(t, "the List row resolved", rowStatus("resolved"))
	if n := fake.CallCount("chat.postMessage"); n < 2 {
		t.Fatalf("%d posts: want the root and its replies", n)
	}
}
