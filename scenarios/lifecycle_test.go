package scenarios

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestSlackArchiveAndErasureScenario runs the end-to-end path on to archive and erasure with the
// real binary and the fake Slack: an inquiry with unique personal strings gets its thread (in a
// channel cleared for personal data) and its List row; archiving removes the row and marks the
// root archived without buttons; a viewer cannot unarchive; after unarchive the row is back; an
// operator's erasure is refused; the admin's erasure deletes the thread (root and replies) and the
// row, so the fake Slack holds none of the strings, while the timeline still lists every version
// with its actor and time. The server runs with a master key file; a command without it is
// refused. It runs on to retention: a policy set with casebook retention set gives the next
// archive its deadline (30 days), a dry run 31 days ahead finds it due, a legal hold makes it held
// instead, and today's sweep erases nothing.
func TestSlackArchiveAndErasureScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ch, secret = "C0OPS000002", "scenario-signing-secret"
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
	op := slackTenantWithOperator(t, dir, fake, secret)
	var out map[string]any
	cli(t, dir, &out, "slack", "destination", "--tenant", "acme", "--channel", ch, "--clearance", "personal")
	cli(t, dir, &out, "lists", "activate", "--tenant", "acme", "--list", li.ID, "--clearance", "internal", "--remove-after", "1h")
	var viewer struct {
		Token string `json:"token"`
	}
	cli(t, dir, &viewer, "principals", "create", "--tenant", "acme", "--name", "Vic", "--role", "viewer")
	// The server runs with a master key file (base64), so every data key is wrapped by it.
	keyFile := filepath.Join(t.TempDir(), "master.key")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, dir, "CASEBOOK_MASTER_KEY_FILE="+keyFile)
	secrets := []string{"Zanzibar Quux", "zanzibar.q5519@example.net", "Subject-Ultramarine-6613", "Message-Vermilion-2290", "Note-Chartreuse-7741",
		"Archive-Reason-Mulberry-5920", "Unarchive-Reason-Pewter-6031"}
	body := fmt.Sprintf(`{"name":%q,"email":%q,"subject":%q,"message":%q,"category":"billing"}`, secrets[0], secrets[1], secrets[2], secrets[3])
	if status, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-erase-1", body); err != nil || status != 202 {
		t.Fatalf("intake = %d %v", status, err)
	}
	id := firstInquiryID(t, srv, op.Token)
	path := "/v1/inquiries/" + id
	detail := func() map[string]any {
		_, d, err := srv.do("GET", path+"?consistent=true", op.Token, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	slackState := func() string {
		sl, _ := detail()["slack"].(map[string]any)
		s, _ := sl["state"].(string)
		return s
	}
	eventually(t, "the root message", func() bool { return slackState() == "synced" })
	eventually(t, "the List row", func() bool { return len(fake.Rows(li.ID)) == 1 })
	if status, _, err := srv.do("POST", path+"/notes", op.Token, "", fmt.Sprintf(`{"body":%q}`, secrets[4])); err != nil || status != 200 {
		t.Fatalf("note = %d %v", status, err)
	}
	eventually(t, "the note's reply", func() bool {
		ms := fake.Messages(ch)
		return len(ms) == 1 && len(ms[0].Replies) >= 1 && slackState() == "synced"
	})
	holds := func(s string) bool {
		for _, m := range fake.Messages(ch) {
			if strings.Contains(m.Text, s) || strings.Contains(string(m.Blocks), s) {
				return true
			}
			for _, r := range m.Replies {
				if strings.Contains(r.Text, s) || strings.Contains(string(r.Blocks), s) {
					return true
				}
			}
		}
		return false
	}
	if !holds(secrets[2]) {
		t.Fatal("the personal channel's root does not show the subject: the erasure check below would prove nothing")
	}
	version := func() string { return fmt.Sprint(detail()["version"]) }

	if status, _, err := srv.doIfMatch("POST", path+"/archive", op.Token, version(), `{"reason":"`+secrets[5]+`"}`); err != nil || status != 200 {
		t.Fatalf("archive = %d %v", status, err)
	}
	eventually(t, "the row removed and the root marked archived", func() bool {
		ms := fake.Messages(ch)
		return len(fake.Rows(li.ID)) == 0 && len(ms) == 1 && strings.Contains(ms[0].Text, "archived") &&
			!strings.Contains(string(ms[0].Blocks), `"action_id"`)
	})
	if status, e, _ := srv.do("POST", path+"/notes", op.Token, "", `{"body":"late"}`); status != 409 || fmt.Sprint(e["error"].(map[string]any)["code"]) != "archived" {
		t.Fatalf("note on archived = %d %v", status, e)
	}
	if status, _, _ := srv.doIfMatch("POST", path+"/unarchive", viewer.Token, version(), ""); status != 403 {
		t.Fatalf("viewer unarchive = %d", status)
	}
	if status, _, err := srv.doIfMatch("POST", path+"/unarchive", op.Token, version(), `{"reason":"`+secrets[6]+`"}`); err != nil || status != 200 {
		t.Fatalf("unarchive = %d %v", status, err)
	}
	eventually(t, "the row back after unarchive", func() bool { return len(fake.Rows(li.ID)) == 1 && slackState() == "synced" })

	if status, _, _ := srv.doIfMatch("POST", path+"/erase", op.Token, version(), ""); status != 403 {
		t.Fatalf("operator erase = %d", status)
	}
	if status, e, err := srv.doIfMatch("POST", path+"/erase", op.AdminToken, version(), ""); err != nil || status != 200 {
		t.Fatalf("erase = %d %v %v", status, e, err)
	}
	eventually(t, "the thread and the row deleted", func() bool {
		return len(fake.Messages(ch)) == 0 && len(fake.Rows(li.ID)) == 0
	})
	for _, s := range secrets {
		if holds(s) {
			t.Errorf("the fake Slack still holds %q", s)
		}
	}
	// While the server runs: once it reports the storage clean-up after the erasure (the first of
	// this data directory, so the first one completed follows it), no file Casebook keeps there
	// (the database, its -wal and -shm, the lock) holds a secret. This is the "10 s after the
	// erasure answers" requirement, waited for on its cause rather than on the clock.
	eventually(t, "the storage clean-up after the erasure", func() bool {
		res, err := http.Get(srv.base + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		m, err := io.ReadAll(res.Body)
		return err == nil && regexp.MustCompile(`(?m)^casebook_erasure_scrubs_total\{outcome="completed"\} [1-9]`).Match(m)
	})
	checked := 0
	if err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q while the server runs, after the erasure's clean-up", p, s)
			}
		}
		return nil
	}); err != nil || checked == 0 {
		t.Fatalf("data directory: %d files, %v", checked, err)
	}
	d := detail()
	if d["erased"] != true || d["subject"] != domain.Erased {
		t.Fatalf("detail after erasure = %v", d)
	}
	_, tl, err := srv.do("GET", path+"/timeline", op.AdminToken, "", "")
	if err != nil {
		t.Fatal(err)
	}
	items, _ := tl["items"].([]any)
	want := []string{"InquiryReceived", "NoteAdded", "InquiryArchived", "InquiryUnarchived", "InquiryErased"}
	if len(items) != len(want) {
		t.Fatalf("timeline = %v", tl)
	}
	for i, it := range items {
		e := it.(map[string]any)
		if e["type"] != want[i] || e["actor"] == "" || e["occurred_at"] == "" {
			t.Fatalf("timeline entry %d = %v", i, e)
		}
		for _, s := range secrets {
			if strings.Contains(fmt.Sprint(e["data"]), s) {
				t.Fatalf("timeline entry %d = %v shows %q", i, e, s)
			}
		}
	}

	policy := filepath.Join(t.TempDir(), "retention.json")
	if err := os.WriteFile(policy, []byte(`{"classes":{"standard":{"archived_for":"30d"}},"default_class":"standard"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, dir, &out, "retention", "set", "--tenant", "acme", "--file", policy, "--master-key-file", keyFile)
	if status, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-retain-1",
		`{"name":"Ada","email":"ada@example.com","subject":"Keep a while","message":"m","category":"billing"}`); err != nil || status != 202 {
		t.Fatalf("second intake = %d %v", status, err)
	}
	id2 := firstInquiryID(t, srv, op.Token)
	// The server's master key is the file's: a command without it is refused, never shown the
	// live inquiry as erased.
	cmd := exec.Command(binary, "retention", "show", "--tenant", "acme", "--data-dir", dir)
	cmd.Env = append(os.Environ(), "CASEBOOK_DATA_DIR=", "CASEBOOK_MASTER_KEY_FILE=")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "not configured") {
		t.Fatalf("a command without the master key = %v %s", err, b)
	}
	path2 := "/v1/inquiries/" + id2
	_, d2, _ := srv.do("GET", path2+"?consistent=true", op.Token, "", "")
	archivedAt := time.Now()
	if status, _, err := srv.doIfMatch("POST", path2+"/archive", op.Token, fmt.Sprint(d2["version"]), `{"reason":"answered"}`); err != nil || status != 200 {
		t.Fatalf("archive the second = %d %v", status, err)
	}
	_, d2, _ = srv.do("GET", path2+"?consistent=true", op.Token, "", "")
	until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d2["retain_until"]))
	if err != nil || until.Before(archivedAt.Add(30*24*time.Hour-time.Minute)) || until.After(time.Now().Add(30*24*time.Hour+time.Minute)) {
		t.Fatalf("retain_until = %v (%v), want 30 days after the archive", d2["retain_until"], err)
	}
	type sweep struct {
		Erased []struct {
			InquiryID string `json:"inquiry_id"`
		} `json:"erased"`
		Held []struct {
			InquiryID string `json:"inquiry_id"`
		} `json:"held"`
		Due []struct {
			InquiryID string `json:"inquiry_id"`
		} `json:"due"`
	}
	later := time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	var preview sweep
	cli(t, dir, &preview, "retention", "sweep", "--dry-run", "--at", later, "--master-key-file", keyFile)
	if len(preview.Due) != 1 || preview.Due[0].InquiryID != id2 || len(preview.Erased) != 0 {
		t.Fatalf("preview in 31 days = %+v, want %s due", preview, id2)
	}
	if status, _, err := srv.do("POST", path2+"/hold", op.AdminToken, "", `{"reason":"dispute"}`); err != nil || status != 200 {
		t.Fatalf("hold = %d %v", status, err)
	}
	preview = sweep{}
	cli(t, dir, &preview, "retention", "sweep", "--dry-run", "--at", later, "--master-key-file", keyFile)
	if len(preview.Due) != 0 || len(preview.Held) != 1 || preview.Held[0].InquiryID != id2 {
		t.Fatalf("preview under hold = %+v, want %s held", preview, id2)
	}
	var now sweep
	cli(t, dir, &now, "retention", "sweep", "--master-key-file", keyFile)
	if len(now.Erased) != 0 {
		t.Fatalf("a sweep today erased %+v", now.Erased)
	}
	if _, d2, _ = srv.do("GET", path2+"?consistent=true", op.Token, "", ""); d2["erased"] != false || d2["subject"] != "Keep a while" {
		t.Fatalf("the archived inquiry after today's sweep = %v", d2)
	}
}

// TestErasureCleanupRetriedAfterDestinationRemoved: the real binary, the fake Slack and
// CASEBOOK_SLACK_MAX_ATTEMPTS=2. An inquiry's thread is posted, then the tenant's destination is
// removed (deactivated in the database: Slack is disabled for new posts). The erasure must still
// delete the thread where it was posted, with the installation that posted it. Every chat.delete
// and every slackLists.items.delete fails (503): the thread's and the row's effects are each
// retried (two attempts, two calls each) and become dead letters that casebook effects list shows,
// while root and row stay. Once Slack answers again, casebook effects retry completes both
// deletions: the fake Slack holds neither the root nor the row, and no dead letter is left.
func TestErasureCleanupRetriedAfterDestinationRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ch = "C0OPS000003"
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{ch}, Clock: fakeslack.SystemClock()})
	li, err := fake.CreateList("Inquiries", apptest.BoardColumns()...)
	if err != nil {
		t.Fatal(err)
	}
	op := slackTenantWithOperator(t, dir, fake, "s")
	var out map[string]any
	cli(t, dir, &out, "slack", "destination", "--tenant", "acme", "--channel", ch, "--clearance", "personal")
	cli(t, dir, &out, "lists", "activate", "--tenant", "acme", "--list", li.ID, "--clearance", "internal")
	srv := start(t, dir, "CASEBOOK_SLACK_MAX_ATTEMPTS=2")
	if status, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-cleanup-1", adaIntake); err != nil || status != 202 {
		t.Fatalf("intake = %d %v", status, err)
	}
	id := firstInquiryID(t, srv, op.Token)
	eventually(t, "the root and the row", func() bool { return len(fake.Messages(ch)) == 1 && len(fake.Rows(li.ID)) == 1 })

	db, err := sqldb.OpenSQLite(filepath.Join(dir, app.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE slack_destinations SET active = 0`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	callCounts := func() map[string]int {
		n := map[string]int{}
		for _, c := range fake.Calls() {
			n[c.Method]++
		}
		return n
	}
	before := callCounts() // the activation probe deleted its probe row already
	fake.AddRule(fakeslack.Rule{Method: "chat.delete", Fault: fakeslack.HTTPStatus(503), Times: -1})
	fake.AddRule(fakeslack.Rule{Method: "slackLists.items.delete", Fault: fakeslack.HTTPStatus(503), Times: -1})
	_, d, err := srv.do("GET", "/v1/inquiries/"+id+"?consistent=true", op.AdminToken, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if status, e, err := srv.doIfMatch("POST", "/v1/inquiries/"+id+"/erase", op.AdminToken, fmt.Sprint(d["version"]), ""); err != nil || status != 200 {
		t.Fatalf("erase = %d %v %v", status, e, err)
	}
	listDead := func() map[string]effectItem {
		var res struct {
			Items []effectItem `json:"items"`
		}
		cli(t, dir, &res, "effects", "list", "--tenant", "acme", "--state", "discarded")
		out := map[string]effectItem{}
		for _, e := range res.Items {
			out[e.Destination] = e
		}
		return out
	}
	var dead map[string]effectItem
	eventually(t, "the thread and the row deletions dead letters", func() bool { dead = listDead(); return len(dead) == 2 })
	for dest, e := range dead {
		if e.Inquiry != id || e.Attempt != 2 || e.Disposition != "dead_letter" || e.LastError == "" || (dest != ch && dest != li.ID) {
			t.Fatalf("dead letter = %+v", e)
		}
	}
	calls := callCounts()
	if calls["chat.delete"]-before["chat.delete"] != 2 || calls["slackLists.items.delete"]-before["slackLists.items.delete"] != 2 {
		t.Fatalf("deletes called %v, want one chat.delete and one items.delete per attempt (2 each)", calls)
	}
	if len(fake.Messages(ch)) != 1 || len(fake.Rows(li.ID)) != 1 {
		t.Fatal("the root or the row is gone although every deletion failed")
	}

	fake.ClearFaults()
	for _, e := range dead {
		var r effectItem
		cli(t, dir, &r, "effects", "retry", "--tenant", "acme", "--id", fmt.Sprint(e.ID))
	}
	eventually(t, "the thread and the row deleted after the retries", func() bool { return len(fake.Messages(ch)) == 0 && len(fake.Rows(li.ID)) == 0 })
	eventually(t, "no dead letter left", func() bool { return len(listDead()) == 0 })
}
