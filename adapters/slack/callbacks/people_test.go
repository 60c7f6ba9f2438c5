package callbacks_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/tenancy"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// refusals counts the audit's pre-command refusals of tenant by "command code actor".
func refusals(t *testing.T, b *bundle, tenant domain.TenantID) map[string]int {
	t.Helper()
	entries, err := b.app.Audit.Entries(t.Context(), tenant, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		if e.Outcome != commands.OutcomeRefused {
			t.Errorf("audit entry %+v: want only refusals", e)
		}
		out[e.Command+" "+e.Code+" "+string(e.Actor)]++
	}
	return out
}

// TestDisabledPrincipalRefusedInSlack: from the request after its principal is disabled, a linked
// Slack user is refused on every Slack path: a button (claim), a button that opens a modal (no
// view is opened), a modal submission and the message shortcut. Each refusal is answered
// ("disabled"), audited before the command layer (code principal_disabled, the principal as
// actor) and appends nothing; enabling the principal restores the same user.
func TestDisabledPrincipalRefusedInSlack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	msg, err := b.fake.InjectMessage(channel, fakeslack.Message{User: "U0ADA00001", Text: "Please help"})
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	if _, _, err := b.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: b.olga.ID, Disable: &yes}); err != nil {
		t.Fatal(err)
	}
	before := apptest.LogLen(t, b.app)
	const disabled = "Your Casebook account is disabled; nothing was done. Ask an admin of your Casebook tenant."
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL))
	if r := b.reply(t); r != disabled {
		t.Fatalf("claim button = %q", r)
	}
	b.interact(t, clickTrigger(team, "U0OLGA0001", ts, callbacks.ActionNote, "1793523600.000002", b.fake.IssueTrigger(), b.respURL))
	if r := b.reply(t); r != disabled {
		t.Fatalf("note button = %q", r)
	}
	if rec := b.interact(t, submit("U0OLGA0001", ts, callbacks.ModalNote, "V0NOTE0001", "note", "called back")); !strings.Contains(rec.Body.String(), `"response_action":"errors"`) ||
		!strings.Contains(rec.Body.String(), "account is disabled") {
		t.Fatalf("modal submission = %d %s", rec.Code, rec.Body)
	}
	b.interact(t, shortcut(callbacks.ShortcutCreateInquiry, "U0OLGA0001", channel, msg, "U0ADA00001", "Please help", "1793523700.000001", b.respURL))
	if r := b.reply(t); r != disabled {
		t.Fatalf("message shortcut = %q", r)
	}
	if n := len(b.fake.Views()); n != 0 {
		t.Fatalf("%d views opened for a disabled principal", n)
	}
	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("refused requests appended: %d → %d events", before, n)
	}
	want := map[string]int{
		"slack_interaction principal_disabled " + string(b.olga.ID): 3,
		"slack_shortcut principal_disabled " + string(b.olga.ID):    1,
	}
	if got := refusals(t, b, b.tenant); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit = %v, want %v", got, want)
	}

	if _, _, err := b.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: b.olga.ID, Disable: &no}); err != nil {
		t.Fatal(err)
	}
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000009", b.respURL))
	if r := b.reply(t); r != "You claimed this inquiry." {
		t.Fatalf("claim after enable = %q", r)
	}
	if q := b.inquiry(t, id); q.Owner != b.olga.ID {
		t.Fatalf("owner after enable = %s", q.Owner)
	}
}

// TestDisabledOwnerNotAssignable: the assign modal refuses a linked user whose principal is
// disabled (the command layer's refusal, audited as such); nothing is appended.
func TestDisabledOwnerNotAssignable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	yes := true
	if _, _, err := b.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: b.bob.ID, Disable: &yes}); err != nil {
		t.Fatal(err)
	}
	rec := b.interact(t, submit("U0OLGA0001", ts, callbacks.ModalAssign, "V0ASSIGN01", "owner", "U0BOB00001"))
	if !strings.Contains(rec.Body.String(), `"response_action":"errors"`) || !strings.Contains(rec.Body.String(), "owner: is disabled") {
		t.Fatalf("assign to a disabled principal = %d %s", rec.Code, rec.Body)
	}
	if q := b.inquiry(t, id); q.Version != 1 || q.Owner != "" {
		t.Fatalf("inquiry changed: version %d owner %s", q.Version, q.Owner)
	}
}

// TestPreCommandRefusalsAudited: refusals before the command layer are audited with a reason
// code: an installation Casebook does not know (no tenant), an unlinked user ("slack:U…"), a root
// Casebook did not post, a workspace signed with another installation's secret; and the log
// lines say only request id, kind and reason: no Slack user, team or channel id, name, email or
// message text.
func TestPreCommandRefusalsAudited(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	b := setupLogged(t, slog.New(slog.NewJSONHandler(logs, nil)))
	id, ts := b.posted(t, "k1")
	other := fakeslack.NewTestServer(t, fakeslack.Options{TeamID: "T0OTHERTEAM", Channels: []string{channel}})
	globex, _, _, err := b.app.Tenancy.CreateTenant(t.Context(), "globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.app.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: globex.ID, Token: other.Token(), SigningSecret: "other-secret", AppID: appID, APIURL: other.URL()}); err != nil {
		t.Fatal(err)
	}
	before := apptest.LogLen(t, b.app)

	unknownApp := strings.Replace(click("T0NOSUCHTM", "U0STRANGER", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL), appID, "A0NOSUCHAP", 1)
	if rec := b.interact(t, unknownApp); rec.Code != 200 {
		t.Fatalf("unknown installation = %d", rec.Code)
	}
	b.interact(t, click(team, "U0STRANGER", ts, callbacks.ActionClaim, "1793523600.000002", b.respURL))
	if r := b.reply(t); !strings.Contains(r, "not linked") {
		t.Fatalf("unlinked = %q", r)
	}
	b.interact(t, click(team, "U0OLGA0001", "1700000000.000001", callbacks.ActionClaim, "1793523600.000003", b.respURL))
	if r := b.reply(t); r != "This inquiry is not available here." {
		t.Fatalf("unknown root = %q", r)
	}
	spoof := click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000004", b.respURL)
	if rec := b.serve(b.request("/slack/interactions", "payload="+url.QueryEscape(spoof), "other-secret", 0)); rec.Code != 401 {
		t.Fatalf("spoofed workspace = %d", rec.Code)
	}

	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("refused requests appended: %d → %d events", before, n)
	}
	if q := b.inquiry(t, id); q.Version != 1 {
		t.Fatalf("inquiry changed to version %d", q.Version)
	}
	want := map[string]int{
		"slack_interaction unlinked_user slack:U0STRANGER":      1,
		"slack_interaction unknown_thread " + string(b.olga.ID): 1,
		"slack_interaction another_workspace slack:U0OLGA0001":  1,
	}
	if got := refusals(t, b, b.tenant); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tenant audit = %v, want %v", got, want)
	}
	if got := refusals(t, b, ""); fmt.Sprint(got) != fmt.Sprint(map[string]int{"slack_interaction unknown_installation slack:U0STRANGER": 1}) {
		t.Fatalf("audit without a tenant = %v", got)
	}
	out := logs.String()
	for _, reason := range []string{"unknown_installation", "unlinked_user", "unknown_thread", "another_workspace"} {
		if !strings.Contains(out, `"reason":"`+reason+`"`) {
			t.Errorf("no log line for %s", reason)
		}
	}
	for _, personal := range []string{"U0STRANGER", "U0OLGA0001", "T0NOSUCHTM", "Olga", "Ada", "ada@example.com", "Invoice twice", "Charged twice"} {
		if strings.Contains(out, personal) {
			t.Errorf("logs contain %q", personal)
		}
	}
}

// TestNoteRateLimitInSlack: a note submitted in Slack past the inquiry's hourly limit is refused in
// the modal, saying the limit and when to try again, with nothing appended.
func TestNoteRateLimitInSlack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	for i := range domain.MaxNotesPerHour {
		if _, err := b.app.Commands.AddNote(t.Context(), commands.AddNote{Target: commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.olga},
			Body: fmt.Sprint("note ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	before := apptest.LogLen(t, b.app)
	rec := b.interact(t, submit("U0OLGA0001", ts, callbacks.ModalNote, "V0NOTE0001", "note", "called back"))
	if body := rec.Body.String(); !strings.Contains(body, `"response_action":"errors"`) || !strings.Contains(body, "Not done: at most 60 notes per inquiry per hour; try again in") {
		t.Fatalf("modal submission = %d %s", rec.Code, body)
	}
	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("a refused note appended: %d → %d events", before, n)
	}
}
