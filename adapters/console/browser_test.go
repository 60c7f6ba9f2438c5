package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/browsertest"
)

const channel = "C0OPS000001"

// deadLetter installs the fake Slack for acme, makes every post fail (503) and dead-letters one
// thread effect for id (a job allowed a single attempt), returning its job id. The Slack worker
// runs until the test ends.
func (tb *testBundle) deadLetter(t *testing.T, id domain.InquiryID) int64 {
	t.Helper()
	ctx := t.Context()
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{channel}})
	fake.AddRule(fakeslack.Rule{Method: "chat.postMessage", Fault: fakeslack.HTTPStatus(503), Times: -1})
	if _, err := tb.app.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: tb.acme, Token: fake.Token(), SigningSecret: "sig-secret",
		AppID: "A0FAKEAPP01", APIURL: fake.URL()}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.app.Slack.SetDestination(ctx, slackinstall.DestinationRequest{Tenant: tb.acme, Channel: channel, Clearance: "internal"}); err != nil {
		t.Fatal(err)
	}
	jobs := tb.app.Effects.Client()
	events, cancel := jobs.Subscribe(river.EventKindJobFailed)
	t.Cleanup(cancel)
	if err := jobs.Start(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Stop(context.Background()) })
	opts := river.InsertOpts{Queue: threads.SyncArgs{}.Kind(), MaxAttempts: 1, Tags: []string{slackeffects.TenantTag(tb.acme)}}
	ins, err := jobs.Insert(ctx, threads.SyncArgs{Tenant: tb.acme, Inquiry: id, Version: 1000}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-events:
			if ev.Job.ID == ins.Job.ID && ev.Job.State == rivertype.JobStateDiscarded {
				return ins.Job.ID
			}
		case <-ctx.Done():
			t.Fatal("the effect was not dead-lettered")
		}
	}
}

// TestConsoleInBrowser drives the console in headless Chromium the way an operator would: sign in
// (keyboard: the skip link comes first), find an inquiry by its receipt, claim it, resolve it while
// a second tab still shows the old version (that tab's change gets the 412 message naming who
// changed it), watch the inbox update live, retry a dead-lettered Slack effect with a reason, read
// the dashboard, and sign out. Screenshots of each page are written for review.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browsertest.New(t)
	dir := browsertest.ScreenshotDir(t, "testdata/screenshots")
	cfg := embedded(t)
	cfg.SlackPollInterval = 20 * time.Millisecond
	tb := setup(t, cfg)
	tb.intake(t, tb.acme, "older-1")
	id, receipt := tb.intake(t, tb.acme, "k1")
	dead := tb.deadLetter(t, id)
	base := tb.srv.URL
	run := func(ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v\nlogs:\n%s", what, err, tb.logs.String())
		}
	}
	text := func(ctx context.Context, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	focused := func(ctx context.Context) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id || document.activeElement.className`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Sign in; the first Tab reaches the skip link, the token field has focus on load.
	run(ctx, "sign-in page", chromedp.Navigate(base+"/console"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if f := focused(ctx); f != "token" {
		t.Errorf("focus on the sign-in page is on %q, want the token field", f)
	}
	browsertest.Screenshot(t, ctx, dir, "signin")
	run(ctx, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), tb.admin), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#q")))
	// Keyboard: the first Tab reaches the skip link, which moves focus to the content.
	run(ctx, "tab", chromedp.KeyEvent(kb.Tab))
	if f := focused(ctx); f != "skip" {
		t.Errorf("first Tab reaches %q, want the skip link", f)
	}
	run(ctx, "skip", chromedp.KeyEvent(kb.Enter))
	if f := focused(ctx); f != "main" {
		t.Errorf("the skip link moves focus to %q, want main", f)
	}

	// Find by receipt, typed in lower case, submitted with Enter.
	run(ctx, "search", chromedp.SendKeys(chromedp.CSS("#q"), strings.ToLower(receipt)+kb.Enter),
		chromedp.WaitVisible(chromedp.Search(`//a[@class="receipt" and text()="`+receipt+`"]`)))
	browsertest.Screenshot(t, ctx, dir, "inbox-search")
	run(ctx, "open", chromedp.Click(chromedp.Search(`//a[text()="`+receipt+`"]`)), chromedp.WaitVisible(chromedp.CSS("#claim")))
	if s := text(ctx, "#slack-state"); !strings.Contains(s, "Saved; Slack") {
		t.Errorf("Slack state reads %q", s)
	}
	if s := text(ctx, "#slack-targets"); !strings.Contains(s, "Thread in "+channel) || !strings.Contains(s, "503") {
		t.Errorf("Slack targets read %q, want the thread's failed write", s)
	}

	// Claim.
	run(ctx, "claim", chromedp.Click(chromedp.CSS("#claim")), chromedp.WaitVisible(flash("Claimed")))
	if s := text(ctx, "#owner"); s != "admin" {
		t.Fatalf("owner after claim = %q", s)
	}
	browsertest.Screenshot(t, ctx, dir, "inquiry")

	// A second tab opens the inquiry at the claimed version.
	tab2, cancel2 := chromedp.NewContext(ctx)
	defer cancel2()
	run(tab2, "second tab", chromedp.Navigate(base+"/console/inquiries/"+string(id)), chromedp.WaitVisible(chromedp.CSS("#transition")))

	// Resolve in the first tab.
	run(ctx, "resolve", chromedp.SetValue(chromedp.CSS("#to"), "resolved"), chromedp.Click(chromedp.CSS("#transition")),
		chromedp.WaitVisible(flash("Status changed")))
	if s := text(ctx, "#status"); s != "Resolved" {
		t.Fatalf("status after resolve = %q", s)
	}

	// The stale tab's change is refused with who changed it; what it typed stays.
	run(tab2, "stale change", chromedp.SetValue(chromedp.CSS("#to"), "waiting"), chromedp.SendKeys(chromedp.CSS("#reason"), "customer asked"),
		chromedp.Click(chromedp.CSS("#transition")), chromedp.WaitVisible(chromedp.CSS("#conflict")))
	if s := text(tab2, "#conflict"); !strings.Contains(s, "changed by admin") || !strings.Contains(s, "reload") {
		t.Fatalf("stale tab says %q", s)
	}
	if v, _ := chromedp.Run(tab2, chromedp.Value(chromedp.CSS("#reason"))); v != "customer asked" {
		t.Errorf("the stale tab lost its reason: %q", v)
	}
	browsertest.Screenshot(t, tab2, dir, "inquiry-stale-412")

	// Live updates: the second tab's inbox shows an inquiry received after it loaded.
	run(tab2, "inbox", chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS("#inbox-list")))
	_, fresh := tb.intake(t, tb.acme, "k-live")
	run(tab2, "live update", chromedp.WaitVisible(chromedp.Search(`//a[@class="receipt" and text()="`+fresh+`"]`)))
	browsertest.Screenshot(t, tab2, dir, "inbox")

	// Retry the dead-lettered effect, with a reason.
	sel := "#effect-" + itoa(dead)
	run(ctx, "admin", chromedp.Navigate(base+"/console/admin"), chromedp.WaitVisible(chromedp.CSS(sel)))
	run(ctx, "destinations", chromedp.WaitVisible(chromedp.Search(`//section[@aria-label="Slack destinations"]//td[text()="`+channel+`"]`)))
	browsertest.Screenshot(t, ctx, dir, "admin")
	run(ctx, "retry", chromedp.SendKeys(chromedp.CSS("#er-"+itoa(dead)), "Slack was down; retrying"),
		chromedp.Click(chromedp.CSS("#retry-"+itoa(dead))), chromedp.WaitVisible(flash("effect queued again")))
	if s := text(ctx, "#flash"); !strings.Contains(s, "effect queued again") {
		t.Fatalf("after retry: %q", s)
	}
	j, err := tb.app.Effects.Client().JobGet(t.Context(), dead)
	if err != nil || j.State == rivertype.JobStateDiscarded {
		t.Fatalf("retried effect is %v (%v)", j.State, err)
	}
	var reason, outcome string
	if err := tb.app.DB.QueryRowContext(t.Context(), `SELECT reason, outcome FROM admin_audit WHERE action = 'effects/retry'`).Scan(&reason, &outcome); err != nil ||
		reason != "Slack was down; retrying" || outcome != "accepted" {
		t.Fatalf("admin audit: %q %q %v", reason, outcome, err)
	}

	// Dashboard, and the inbox on a phone-sized screen.
	run(ctx, "dashboard", chromedp.Navigate(base+"/console/dashboard"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	if s := text(ctx, "#totals"); !strings.HasPrefix(s, "3 received and 1 closed") {
		t.Errorf("dashboard totals: %q", s)
	}
	if s := text(ctx, "#breaches"); !strings.HasPrefix(s, "0 of the inquiries") {
		t.Errorf("dashboard breaches: %q", s)
	}
	browsertest.Screenshot(t, ctx, dir, "dashboard")
	run(ctx, "phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS("#inbox-list")))
	browsertest.Screenshot(t, ctx, dir, "inbox-phone")
	run(ctx, "desktop", chromedp.EmulateViewport(1280, 900))

	// Sign out: the session ends, and the inbox asks to sign in again.
	run(ctx, "sign out", chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS("#signout")),
		chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	run(ctx, "after sign-out", chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS("#token")))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "/console/signin?next=") {
		t.Fatalf("after sign-out the inbox is at %q (%v)", loc, err)
	}
}

// flash selects the confirmation that a page shows after an action (a new page, not the last one).
func flash(text string) chromedp.Search {
	return chromedp.Search(`//*[@id="flash" and contains(., "` + text + `")]`)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
