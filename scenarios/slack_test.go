package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/internal/httptestclient"
)

// eventually polls cond (the fake's state) until it holds, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// TestSlackThreadScenario: the real binary with the fake Slack: install, destination, intake →
// one root message; transitions update it and reply in its thread; the detail shows "synced".
func TestSlackThreadScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{"C0OPS000001"}})
	op := slackTenantWithOperator(t, dir, fake, "s")
	var inst map[string]any
	cli(t, dir, &inst, "slack", "destination", "--tenant", "acme", "--channel", "C0OPS000001", "--clearance", "internal")
	srv := start(t, dir)

	status, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-1",
		adaIntake)
	if err != nil || status != 202 {
		t.Fatalf("intake = %d %v", status, err)
	}
	eventually(t, "the root message", func() bool { return len(fake.Messages("C0OPS000001")) == 1 })
	id := firstInquiryID(t, srv, op.Token)
	for v, body := range []string{`{"to":"triaged","priority":"high"}`, `{"to":"in_progress"}`} {
		req := fmt.Sprintf("/v1/inquiries/%s/transitions", id)
		if status, res, err := srv.doIfMatch("POST", req, op.Token, fmt.Sprint(v+1), body); err != nil || status != 200 {
			t.Fatalf("transition = %d %v %v", status, res, err)
		}
	}
	eventually(t, "the thread at version 3", func() bool {
		m := fake.Messages("C0OPS000001")
		return len(m) == 1 && len(m[0].Replies) >= 1 && strings.Contains(m[0].Replies[len(m[0].Replies)-1].Text, "version 3")
	})
	root := fake.Messages("C0OPS000001")[0]
	if root.EditedTS == "" || !strings.Contains(root.Text, "in_progress") || strings.Contains(string(root.Blocks), "Ada Lovelace") {
		t.Fatalf("root = %q edited=%q", root.Text, root.EditedTS)
	}
	eventually(t, "slack synced on the detail", func() bool {
		_, d, err := srv.do("GET", "/v1/inquiries/"+id, op.Token, "", "")
		sl, _ := d["slack"].(map[string]any)
		return err == nil && sl["state"] == "synced"
	})
}

// doIfMatch is do with an If-Match version.
func (s *server) doIfMatch(method, path, token, version, body string) (int, map[string]any, error) {
	return httptestclient.Client{Base: s.base}.Do(context.Background(), httptestclient.Request{Method: method, Path: path,
		Token: token, Body: body, Header: map[string]string{"If-Match": `"` + version + `"`}})
}

// TestAttachmentsNeverInSlack: what holds for attachments and Slack is that nothing of them is ever
// posted, at any clearance: Slack effects render from the inquiry's events, and attachments are not
// events. A portal intake with a file, projected to a channel cleared for personal data (the
// highest clearance, which shows the requester's name), and a transition that replies in the
// thread: neither the file's name nor its bytes appear in any message, reply or block.
func TestAttachmentsNeverInSlack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{"C0OPS000001"}})
	op := slackTenantWithOperator(t, dir, fake, "s")
	var inst map[string]any
	cli(t, dir, &inst, "slack", "destination", "--tenant", "acme", "--channel", "C0OPS000001", "--clearance", "personal")
	var portal struct{ Token string }
	cli(t, dir, &portal, "principals", "create", "--tenant", "acme", "--name", "Portal", "--role", "integration")
	srv := start(t, dir)

	const name, content = "Filename-Quince-5521.txt", "Content-Sorrel-8830: the invoice lines."
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("inquiry", `{"name":"Grace Hopper","email":"grace@example.com","external_id":"c-1","subject":"Invoice","message":"See the file.","category":"billing"}`); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte(content))
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, srv.base+"/v1/inquiries", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+portal.Token)
	req.Header.Set("Idempotency-Key", "p-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created map[string]any
	_ = json.NewDecoder(res.Body).Decode(&created)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated || len(created["attachments"].([]any)) != 1 {
		t.Fatalf("intake with a file = %d %v", res.StatusCode, created)
	}
	id := created["id"].(string)
	eventually(t, "the root message", func() bool { return len(fake.Messages("C0OPS000001")) == 1 })
	if status, r, err := srv.doIfMatch("POST", "/v1/inquiries/"+id+"/transitions", op.Token, "1", `{"to":"triaged","priority":"high"}`); err != nil || status != 200 {
		t.Fatalf("triage = %d %v %v", status, r, err)
	}
	eventually(t, "the thread's reply at version 2", func() bool {
		m := fake.Messages("C0OPS000001")
		return len(m) == 1 && len(m[0].Replies) >= 1 && strings.Contains(m[0].Replies[len(m[0].Replies)-1].Text, "version 2")
	})
	var all strings.Builder
	for _, m := range fake.Messages("C0OPS000001") {
		all.WriteString(m.Text + string(m.Blocks))
		for _, r := range m.Replies {
			all.WriteString(r.Text + string(r.Blocks))
		}
	}
	if !strings.Contains(all.String(), "Grace Hopper") {
		t.Fatalf("the personal channel does not show the requester, so it proves nothing: %s", all.String())
	}
	for _, s := range []string{"Quince", "Sorrel", "invoice lines"} {
		if strings.Contains(all.String(), s) {
			t.Errorf("Slack received %q of the attachment: %s", s, all.String())
		}
	}
}
