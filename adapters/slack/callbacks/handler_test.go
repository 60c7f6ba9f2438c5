package callbacks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// TestClaimAndResolveByButtons: signed clicks become audited commands by the linked principal;
// the inquiry is found from the stored root (the button value is ignored); the thread shows it.
func TestClaimAndResolveByButtons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	if rec := b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL)); rec.Code != 200 {
		t.Fatalf("claim = %d", rec.Code)
	}
	if r := b.reply(t); r != "You claimed this inquiry." {
		t.Fatalf("reply = %q", r)
	}
	if q := b.inquiry(t, id); q.Owner != b.olga.ID || q.Status != domain.StatusInProgress {
		t.Fatalf("after claim: owner %s status %s", q.Owner, q.Status)
	}
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionResolve, "1793523601.000001", b.respURL))
	if r := b.reply(t); r != "Moved to resolved." {
		t.Fatalf("reply = %q", r)
	}
	b.sync(t)
	root := b.fake.Messages(channel)[0]
	if !strings.Contains(root.Text, "resolved") || len(root.Replies) == 0 {
		t.Fatalf("root after resolve = %q, %d replies", root.Text, len(root.Replies))
	}
	entries, err := b.app.Audit.Entries(t.Context(), b.tenant, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Command+":"+string(e.Outcome)+":"+string(e.Actor))
	}
	want := "claim:accepted:" + string(b.olga.ID) + ",transition:accepted:" + string(b.olga.ID)
	if strings.Join(got, ",") != want {
		t.Fatalf("audit = %v, want %s", got, want)
	}
}

// TestRefusedRequestsChangeNothing: tampered (one byte), wrong secret, expired and future
// requests are 401 and run no command.
func TestRefusedRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	body := "payload=" + url.QueryEscape(click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL))
	tampered := b.request("/slack/interactions", body, secret, 0)
	tampered.Body = ioNop(body[:len(body)-1] + "0")
	cases := map[string]*httptestReq{
		"one byte different": {tampered},
		"wrong secret":       {b.request("/slack/interactions", body, "not-the-secret", 0)},
		"expired":            {b.request("/slack/interactions", body, secret, -6*time.Minute)},
		"future":             {b.request("/slack/interactions", body, secret, 6*time.Minute)},
		"events tampered":    {b.request("/slack/events", `{"type":"url_verification","challenge":"x"}`, "not-the-secret", 0)},
	}
	for name, c := range cases {
		if rec := b.serve(c.req); rec.Code != 401 {
			t.Fatalf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	if q := b.inquiry(t, id); q.Version != 1 || q.Owner != "" {
		t.Fatalf("inquiry changed: version %d owner %s", q.Version, q.Owner)
	}
	if entries, _ := b.app.Audit.Entries(t.Context(), b.tenant, 10); len(entries) != 0 {
		t.Fatalf("commands ran: %+v", entries)
	}
}

// TestDuplicateDeliveriesApplyOnce: the same signed delivery twice (a replay inside the window)
// is one command: the second replays the first result and appends nothing.
func TestDuplicateDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL))
	b.reply(t)
	resolve := click(team, "U0OLGA0001", ts, callbacks.ActionResolve, "1793523601.000001", b.respURL)
	req := b.request("/slack/interactions", "payload="+url.QueryEscape(resolve), secret, 0)
	again := b.request("/slack/interactions", "payload="+url.QueryEscape(resolve), secret, 0)
	b.serve(req)
	first := b.reply(t)
	b.serve(again)
	second := b.reply(t)
	if first != "Moved to resolved." || second != first {
		t.Fatalf("answers %q, %q", first, second)
	}
	if q := b.inquiry(t, id); q.Version != 4 || q.Status != domain.StatusResolved {
		t.Fatalf("version %d status %s, want 4 resolved", q.Version, q.Status)
	}
	entries, _ := b.app.Audit.Entries(t.Context(), b.tenant, 10)
	if n := len(entries); n != 3 || entries[2].Outcome != "replayed" {
		t.Fatalf("audit = %+v", entries)
	}
}

// TestUnknownSlackUserRefused: a user of the right workspace without a link runs nothing.
func TestUnknownSlackUserRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	b.interact(t, click(team, "U0STRANGER", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL))
	if r := b.reply(t); !strings.Contains(r, "not linked") {
		t.Fatalf("reply = %q", r)
	}
	if q := b.inquiry(t, id); q.Version != 1 {
		t.Fatalf("inquiry changed to version %d", q.Version)
	}
	// No command ran; the refusal is audited before the command layer.
	if entries, _ := b.app.Audit.Entries(t.Context(), b.tenant, 10); len(entries) != 1 || entries[0].Command != "slack_interaction" ||
		entries[0].Code != callbacks.RefusedUnlinkedUser || entries[0].Actor != "slack:U0STRANGER" {
		t.Fatalf("audit = %+v", entries)
	}
}

// TestCrossWorkspacePayloadChangesNothing: another tenant's workspace, validly signed, names
// this tenant's channel and root ts: nothing is found. A payload claiming this workspace but
// signed with the other app's secret is refused.
func TestCrossWorkspacePayloadChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	ctx := t.Context()
	other := fakeslack.NewTestServer(t, fakeslack.Options{TeamID: "T0OTHERTEAM", Channels: []string{channel}})
	globex, admin, _, err := b.app.Tenancy.CreateTenant(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.app.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: globex.ID, Token: other.Token(), SigningSecret: "other-secret", AppID: appID, APIURL: other.URL()}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.app.Slack.LinkUser(ctx, globex.ID, "", "U0MALLORY1", admin.ID); err != nil {
		t.Fatal(err)
	}
	payload := click("T0OTHERTEAM", "U0MALLORY1", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL)
	if rec := b.serve(b.request("/slack/interactions", "payload="+url.QueryEscape(payload), "other-secret", 0)); rec.Code != 200 {
		t.Fatalf("cross-workspace = %d", rec.Code)
	}
	if r := b.reply(t); r != "This inquiry is not available here." {
		t.Fatalf("reply = %q", r)
	}
	spoof := click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000002", b.respURL)
	if rec := b.serve(b.request("/slack/interactions", "payload="+url.QueryEscape(spoof), "other-secret", 0)); rec.Code != 401 {
		t.Fatalf("spoofed workspace = %d", rec.Code)
	}
	if q := b.inquiry(t, id); q.Version != 1 {
		t.Fatalf("inquiry changed to version %d", q.Version)
	}
	// No command ran: each tenant's audit holds only the refusal its installation saw.
	for tn, code := range map[domain.TenantID]string{b.tenant: callbacks.RefusedAnotherWorkspace, globex.ID: callbacks.RefusedUnknownThread} {
		if entries, _ := b.app.Audit.Entries(ctx, tn, 10); len(entries) != 1 || entries[0].Outcome != commands.OutcomeRefused || entries[0].Code != code {
			t.Fatalf("audit of %s = %+v, want one %s refusal", tn, entries, code)
		}
	}
}

// TestConcurrentClaimsOneWinner: two users click claim at once: one owns the inquiry, the other
// is told who does.
func TestConcurrentClaimsOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	var wg sync.WaitGroup
	for i, u := range []string{"U0OLGA0001", "U0BOB00001"} {
		wg.Go(func() {
			b.interact(t, click(team, u, ts, callbacks.ActionClaim, "1793523600.00000"+string(rune('1'+i)), b.respURL))
		})
	}
	wg.Wait()
	answers := []string{b.reply(t), b.reply(t)}
	q := b.inquiry(t, id)
	winner := "Olga"
	if q.Owner == b.bob.ID {
		winner = "Bob"
	}
	joined := strings.Join(answers, "|")
	if !strings.Contains(joined, "You claimed this inquiry.") || !strings.Contains(joined, "Already claimed by "+winner+".") {
		t.Fatalf("answers = %q (owner %s)", answers, q.Owner)
	}
	if q.Version != 3 {
		t.Fatalf("version %d, want 3 (one assignment, one status change)", q.Version)
	}
}

// TestModalsOpenAndSubmit: the assign, note and cancel buttons open their modal through the fake's
// views.open with the installation's bot token (the fake accepts no other), carrying the root's
// channel and ts, inside Slack's modal limits (the strict fake refuses a max_length over 3000); a
// note longer than the modal allows is refused with a clear message; each view_submission runs
// its command. A reused trigger id is refused by Slack
// and the user is told on response_url.
func TestModalsOpenAndSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	open := func(action string, n int) (fakeslack.View, string) {
		t.Helper()
		trig := b.fake.IssueTrigger()
		if rec := b.interact(t, clickTrigger(team, "U0OLGA0001", ts, action, fmt.Sprintf("1793523600.00000%d", n), trig, b.respURL)); rec.Code != 200 || rec.Body.Len() != 0 {
			t.Fatalf("%s click = %d %s", action, rec.Code, rec.Body)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		views, err := b.fake.WaitViews(ctx, n)
		if err != nil {
			t.Fatalf("%s: no view opened: %v", action, err)
		}
		v := views[n-1]
		if v.TriggerID != trig || v.PrivateMetadata != channel+" "+ts {
			t.Fatalf("%s view = %+v", action, v)
		}
		return v, trig
	}
	v, _ := open(callbacks.ActionNote, 1)
	if v.CallbackID != callbacks.ModalNote {
		t.Fatalf("note view = %+v", v)
	}
	// Slack's plain_text_input allows at most 3000 characters: a longer note is refused, clearly.
	if rec := b.interact(t, submit("U0OLGA0001", ts, v.CallbackID, v.ID+"long", "note", strings.Repeat("n", 3001))); !strings.Contains(rec.Body.String(), "at most 3000 characters") {
		t.Fatalf("long note = %d %s", rec.Code, rec.Body)
	}
	if rec := b.interact(t, submit("U0OLGA0001", ts, v.CallbackID, v.ID, "note", "called back")); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("note = %d %s", rec.Code, rec.Body)
	}
	v, _ = open(callbacks.ActionAssign, 2)
	if v.CallbackID != callbacks.ModalAssign {
		t.Fatalf("assign view = %+v", v)
	}
	rec := b.interact(t, submit("U0OLGA0001", ts, v.CallbackID, v.ID, "owner", "U0NOBODY01"))
	if !strings.Contains(rec.Body.String(), `"response_action":"errors"`) || !strings.Contains(rec.Body.String(), "not linked") {
		t.Fatalf("assign to unlinked = %s", rec.Body)
	}
	if rec := b.interact(t, submit("U0OLGA0001", ts, v.CallbackID, v.ID+"b", "owner", "U0BOB00001")); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("assign = %d %s", rec.Code, rec.Body)
	}
	v, trig := open(callbacks.ActionCancel, 3)
	if v.CallbackID != callbacks.ModalCancel {
		t.Fatalf("cancel view = %+v", v)
	}
	rec = b.interact(t, submit("U0OLGA0001", ts, v.CallbackID, v.ID, "reason", "  "))
	var answer struct {
		Action string            `json:"response_action"`
		Errors map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Errors["reason"] == "" {
		t.Fatalf("cancel without reason = %s", rec.Body)
	}
	if rec := b.interact(t, submit("U0OLGA0001", ts, v.CallbackID, v.ID+"b", "reason", "duplicate")); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("cancel = %d %s", rec.Code, rec.Body)
	}
	q := b.inquiry(t, id)
	if q.Owner != b.bob.ID || q.Status != domain.StatusCancelled {
		t.Fatalf("owner %s status %s", q.Owner, q.Status)
	}
	b.project(t)
	tl, err := b.app.Reader.Timeline(t.Context(), b.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tl {
		got = append(got, e.Type+string(e.Data))
	}
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, `NoteAdded{"body":"called back"}`) || !strings.Contains(joined, `"reason":"duplicate"`) {
		t.Fatalf("timeline = %s", joined)
	}
	// A trigger id works once: the same click again is refused by Slack, and said so.
	b.interact(t, clickTrigger(team, "U0OLGA0001", ts, callbacks.ActionNote, "1793523600.000009", trig, b.respURL))
	if r := b.reply(t); r != "Could not open the form; try again." {
		t.Fatalf("reused trigger reply = %q", r)
	}
	if n := len(b.fake.Views()); n != 3 {
		t.Fatalf("%d views open, want 3", n)
	}
}

// TestEventsVerificationDedupeAndUninstall: url_verification answers the challenge;
// app_uninstalled opens the installation's circuits once, however often it is delivered.
func TestEventsVerificationDedupeAndUninstall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.serve(b.request("/slack/events", `{"type":"url_verification","challenge":"ch4ll3nge"}`, secret, 0))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"challenge":"ch4ll3nge"`) {
		t.Fatalf("url_verification = %d %s", rec.Code, rec.Body)
	}
	ev := `{"type":"event_callback","team_id":"` + team + `","api_app_id":"` + appID + `","event_id":"Ev0001","event":{"type":"app_uninstalled"}}`
	for i := range 3 {
		req := b.request("/slack/events", ev, secret, 0)
		if i > 0 {
			req.Header.Set("X-Slack-Retry-Num", "1")
		}
		if rec := b.serve(req); rec.Code != 200 {
			t.Fatalf("delivery %d = %d", i, rec.Code)
		}
	}
	cs, err := b.app.Effects.Guard.Circuits(t.Context(), b.tenant)
	if err != nil || len(cs) != 1 || !cs[0].Open || cs[0].Reason != "app_uninstalled" {
		t.Fatalf("circuits = %+v %v", cs, err)
	}
	evs, err := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(b.tenant), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "SlackInstallationDisabled" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d SlackInstallationDisabled events, want 1", n)
	}
}

// TestStaleClickNamesWhoChangedIt: a click on a root that another operator has since changed is
// answered "changed by <name>" once the query model knows who (the timeline, tenant-scoped);
// while it lags, or when the last change was the intake, no name is given, and the requester
// never appears.
func TestStaleClickNamesWhoChangedIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionResolve, "1793523600.000001", b.respURL))
	if r := b.reply(t); r != "This inquiry was changed (now new) — refresh and try again." {
		t.Fatalf("resolve of a new inquiry = %q", r)
	}
	tgt := commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.bob, IdempotencyKey: "bob-claim"}
	if _, err := b.app.Commands.Claim(t.Context(), commands.Claim{Target: tgt}); err != nil {
		t.Fatal(err)
	}
	tgt.IdempotencyKey = "bob-resolve"
	if _, err := b.app.Commands.Transition(t.Context(), commands.Transition{Target: tgt, To: domain.StatusResolved}); err != nil {
		t.Fatal(err)
	}
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionResolve, "1793523600.000002", b.respURL))
	if r := b.reply(t); r != "This inquiry was changed (now resolved, owned by Bob) — refresh and try again." {
		t.Fatalf("before the query model caught up = %q", r)
	}
	b.project(t)
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionResolve, "1793523600.000003", b.respURL))
	r := b.reply(t)
	if r != "This inquiry was changed by Bob (now resolved, owned by Bob) — refresh and try again." {
		t.Fatalf("stale resolve = %q", r)
	}
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000004", b.respURL))
	if r := b.reply(t); !strings.Contains(r, "changed by Bob") {
		t.Fatalf("stale claim = %q", r)
	}
	if strings.Contains(r, "Ada") || strings.Contains(r, "example.com") {
		t.Fatalf("requester data in %q", r)
	}
}

// TestStaleButtonOnArchivedInquiryRefused: a click on a button of a root posted before the inquiry
// was archived (a stale message the archive has not re-rendered yet, or a copy) runs no write:
// the answer says the inquiry is archived, nothing is appended, and the refusal is audited.
func TestStaleButtonOnArchivedInquiryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	if _, err := b.app.Commands.Archive(t.Context(), commands.Archive{Target: commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.olga},
		Reason: "answered"}); err != nil {
		t.Fatal(err)
	}
	before := b.inquiry(t, id).Version
	for i, action := range []string{callbacks.ActionClaim, callbacks.ActionResolve} {
		if rec := b.interact(t, click(team, "U0OLGA0001", ts, action, fmt.Sprintf("1793523600.00000%d", i+1), b.respURL)); rec.Code != 200 {
			t.Fatalf("%s = %d", action, rec.Code)
		}
		if r := b.reply(t); !strings.Contains(r, "archived") {
			t.Fatalf("%s reply = %q, want it to say the inquiry is archived", action, r)
		}
	}
	if q := b.inquiry(t, id); q.Version != before || q.Owner != "" || !q.Archived {
		t.Fatalf("after the stale clicks: version %d (was %d) owner %q archived %v", q.Version, before, q.Owner, q.Archived)
	}
	entries, err := b.app.Audit.Entries(t.Context(), b.tenant, 10)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range entries {
		if e.Outcome == commands.OutcomeRefused && e.Code == "archived" && e.Actor == b.olga.ID {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("audit = %+v, want both clicks refused as archived", entries)
	}
}
