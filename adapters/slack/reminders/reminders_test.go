package reminders_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/reminders"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/tenancy"
)

// followUpFired takes an inquiry in, posts its thread, lets Olga claim it with Bob and Carl as
// watchers, sets a follow-up in an hour with a note, and ticks past it: the FollowUpDue is in the
// log and its reminder job queued (not yet worked).
func followUpFired(t *testing.T, b *bundle, key string) domain.InquiryID {
	t.Helper()
	ctx := t.Context()
	id := apptest.Intake(t, b.app, b.tenant, key)
	noErrors(t, b.sync(t))
	if _, err := b.app.Commands.Claim(ctx, commands.Claim{Target: b.target(id, b.olga)}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []domain.Principal{b.bob, b.carl} {
		if _, err := b.app.Commands.AddWatcher(ctx, commands.AddWatcher{Target: b.target(id, b.olga), Principal: w.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.app.Commands.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: b.target(id, b.olga), In: time.Hour, Note: "call Ada back"}); err != nil {
		t.Fatal(err)
	}
	noErrors(t, b.sync(t))
	b.clock.Advance(61 * time.Minute)
	b.tick(t)
	return id
}

// uuidRE finds a principal, tenant or inquiry id in posted text.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestReminderReplyMentionsLinkedRecipients: a fired follow-up becomes one reply in the inquiry's
// thread that mentions the linked Slack users of its recipients (who set it, the owner, the
// watchers) and names no principal id; the unlinked watcher is counted, not named, in an internal
// channel; running the job again posts nothing. On SQLite and Postgres.
func TestReminderReplyMentionsLinkedRecipients(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := setup(t, cfg, "internal")
		id := followUpFired(t, b, "k1")
		noErrors(t, b.sync(t))
		reps := b.reminderReplies(t, id)
		if len(reps) != 1 {
			t.Fatalf("%d reminder replies, want 1: %+v", len(reps), b.root(t, id).Replies)
		}
		got := raw(t, reps[0])
		for _, want := range []string{"Follow-up due", "<@" + olgaSlack + ">", "<@" + bobSlack + ">", "1 without a linked Slack account"} {
			if !strings.Contains(got, want) {
				t.Errorf("reply lacks %q: %s", want, got)
			}
		}
		for _, never := range []string{string(b.olga.ID), string(b.bob.ID), string(b.carl.ID), "Carl Unlinked", "call Ada back", "Ada Lovelace"} {
			if strings.Contains(got, never) {
				t.Errorf("internal channel got %q: %s", never, got)
			}
		}
		if u := uuidRE.FindString(raw(t, b.root(t, id))); u != "" {
			t.Errorf("the thread (root and replies) shows the id %s", u)
		}
		if reps[0].Metadata == nil || reps[0].Metadata.EventType != slackeffects.MetadataEventType {
			t.Errorf("reply not marked with its effect key: %+v", reps[0].Metadata)
		}
		// At least once: the job runs again (a redelivery) and finds its reply recorded.
		for _, j := range apptest.Jobs(t, b.app.Effects.Client(), reminders.ReminderArgs{}.Kind()) {
			if err := b.app.Effects.WorkJob(t.Context(), j); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(b.reminderReplies(t, id)); n != 1 {
			t.Fatalf("%d reminder replies after the job ran again, want 1", n)
		}
	})
}

// TestReminderRedactedForClearance: who is named, and the follow-up's note, follow the thread
// destination's clearance: a public channel mentions nobody and shows no note; an internal one
// mentions linked users only; a personal one also names the unlinked watcher and shows the note.
func TestReminderRedactedForClearance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		clearance  string
		want, deny []string
	}{
		{"public", []string{"Follow-up due"}, []string{"<@", "Carl Unlinked", "call Ada back", "without a linked"}},
		{"internal", []string{"<@" + olgaSlack + ">", "1 without a linked Slack account"}, []string{"Carl Unlinked", "call Ada back"}},
		{"personal", []string{"<@" + olgaSlack + ">", "<@" + bobSlack + ">", "Carl Unlinked", "call Ada back"}, []string{"without a linked"}},
	} {
		t.Run(tc.clearance, func(t *testing.T) {
			t.Parallel()
			b := setup(t, apptest.Backends[0].Config(t), tc.clearance)
			id := followUpFired(t, b, "k1")
			noErrors(t, b.sync(t))
			reps := b.reminderReplies(t, id)
			if len(reps) != 1 {
				t.Fatalf("%d reminder replies, want 1", len(reps))
			}
			got := raw(t, reps[0])
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q: %s", w, got)
				}
			}
			for _, d := range tc.deny {
				if strings.Contains(got, d) {
					t.Errorf("shows %q: %s", d, got)
				}
			}
		})
	}
}

// TestReminderOnceWhenReplyOutcomeUnknown: the reply's post is applied by Slack but the
// connection drops, so its outcome is unknown. The retry looks the reply up in the thread
// (conversations.replies) by its effect key and adopts it: one reply, one post. On SQLite and
// Postgres.
func TestReminderOnceWhenReplyOutcomeUnknown(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := setup(t, cfg, "internal")
		id := followUpFired(t, b, "k1")
		noErrors(t, b.work(t, threads.SyncArgs{}.Kind())) // the thread's own update reply first
		posts := b.fake.CallCount("chat.postMessage")
		b.fake.FailNext("chat.postMessage", fakeslack.DropAfterApply())
		errs := b.sync(t)
		if len(errs) != 1 || errs[0] == nil {
			t.Fatalf("dropped post: errors %v, want one", errs)
		}
		j := apptest.Jobs(t, b.app.Effects.Client(), reminders.ReminderArgs{}.Kind())[0]
		if err := b.app.Effects.WorkJob(t.Context(), j); err == nil {
			t.Fatal("a retry while the first attempt may be in flight did not wait")
		}
		b.clock.Advance(2 * time.Minute) // past the in-flight guard: the retry reconciles
		if err := b.app.Effects.WorkJob(t.Context(), j); err != nil {
			t.Fatal(err)
		}
		if n := len(b.reminderReplies(t, id)); n != 1 {
			t.Fatalf("%d reminder replies, want 1", n)
		}
		if n := b.fake.CallCount("chat.postMessage") - posts; n != 1 {
			t.Fatalf("%d posts for one reminder, want 1", n)
		}
		if b.fake.CallCount("conversations.replies") == 0 {
			t.Fatal("no lookup before the retry")
		}
	})
}

// TestNoReminderAfterResolution: a reminder whose inquiry is resolved after it fired and before
// its reply was sent makes no Slack call.
func TestNoReminderAfterResolution(t *testing.T) {
	t.Parallel()
	b := setup(t, apptest.Backends[0].Config(t), "internal")
	id := followUpFired(t, b, "k1")
	apptest.Transition(t, b.app, b.olga, id, domain.StatusResolved, "")
	noErrors(t, b.sync(t))
	if n := len(b.reminderReplies(t, id)); n != 0 {
		t.Fatalf("%d reminders after resolution", n)
	}
	if n := len(apptest.Jobs(t, b.app.Effects.Client(), reminders.ReminderArgs{}.Kind())); n != 1 {
		t.Fatalf("%d reminder jobs, want the one that found nothing to do", n)
	}
}

const policy = `{"time_zone":"UTC","targets":{"normal":{"first_response":"1h","resolution":"4h"}},"warning_at":0.5}`

// slaBreached sets the SLA policy, takes an inquiry in, posts its thread and ticks through the
// first-response warning, breach and escalation.
func slaBreached(t *testing.T, b *bundle) domain.InquiryID {
	t.Helper()
	if _, _, err := b.app.Commands.SetSLAPolicy(t.Context(), commands.SetSLAPolicy{Tenant: b.tenant, Actor: b.admin, Policy: []byte(policy)}); err != nil {
		t.Fatal(err)
	}
	id := apptest.Intake(t, b.app, b.tenant, "k1")
	if _, err := b.app.Commands.AddWatcher(t.Context(), commands.AddWatcher{Target: b.target(id, b.olga), Principal: b.bob.ID}); err != nil {
		t.Fatal(err)
	}
	noErrors(t, b.sync(t))
	b.clock.Advance(31 * time.Minute)
	b.tick(t) // warning
	noErrors(t, b.sync(t))
	b.clock.Advance(30 * time.Minute)
	b.tick(t) // breach
	b.tick(t) // escalation, due at the breach
	noErrors(t, b.sync(t))
	return id
}

// TestEscalationPostRedactedForClearance: an SLA warning and a breach are replies in the thread
// mentioning the watchers; the escalation is one post in the tenant's escalation destination,
// rendered for its clearance (public: receipt, priority, link; no owner, team, escalation detail
// or requester data); the job run again posts nothing. On SQLite and Postgres.
func TestEscalationPostRedactedForClearance(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := setup(t, cfg, "internal")
		b.escalateTo(t, "public")
		id := slaBreached(t, b)
		reps := b.reminderReplies(t, id)
		if len(reps) != 2 || !strings.HasPrefix(reps[0].Text, "SLA warning") || !strings.HasPrefix(reps[1].Text, "SLA breached") {
			t.Fatalf("replies = %s", raw(t, reps))
		}
		if !strings.Contains(reps[1].Text, "<@"+bobSlack+">") {
			t.Fatalf("breach reply does not mention the watcher: %s", reps[1].Text)
		}
		posts := b.fake.Messages(escChannel)
		if len(posts) != 1 {
			t.Fatalf("%d escalation posts, want 1", len(posts))
		}
		got := raw(t, posts[0])
		q, err := b.app.Commands.Load(t.Context(), b.tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Escalated: inquiry " + q.Receipt, "https://casebook.example/inquiries/r/"} {
			if !strings.Contains(got, want) {
				t.Errorf("escalation post lacks %q: %s", want, got)
			}
		}
		if u := uuidRE.FindString(got + raw(t, b.root(t, id))); u != "" {
			t.Errorf("the escalation post or the thread shows the id %s", u)
		}
		for _, never := range []string{"Ada Lovelace", "ada@example.com", "Invoice", string(id), "level 1", "Team", "<@"} {
			if strings.Contains(got, never) {
				t.Errorf("public escalation post shows %q: %s", never, got)
			}
		}
		for _, j := range apptest.Jobs(t, b.app.Effects.Client(), reminders.EscalationArgs{}.Kind()) {
			if err := b.app.Effects.WorkJob(t.Context(), j); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(b.fake.Messages(escChannel)); n != 1 {
			t.Fatalf("%d escalation posts after the job ran again", n)
		}
	})
}

// TestEscalationPostOnceWhenOutcomeUnknown: an escalation post whose outcome is unknown (the
// caller gave up while Slack applied it) is looked up in the channel's history before a retry
// posts, and adopted.
func TestEscalationPostOnceWhenOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t, apptest.Backends[0].Config(t), "internal")
	b.escalateTo(t, "internal")
	b.fake.AddRule(fakeslack.Rule{Method: "chat.postMessage", Channel: escChannel, Fault: fakeslack.TimeoutAfterApply(0), Times: 1})
	if _, _, err := b.app.Commands.SetSLAPolicy(t.Context(), commands.SetSLAPolicy{Tenant: b.tenant, Actor: b.admin, Policy: []byte(policy)}); err != nil {
		t.Fatal(err)
	}
	apptest.Intake(t, b.app, b.tenant, "k1")
	noErrors(t, b.sync(t))
	b.clock.Advance(61 * time.Minute)
	b.tick(t) // breach (the warning's time passed with it: it fires first)
	b.tick(t)
	b.tick(t)
	apptest.CatchUp(t, b.app)
	jobs := apptest.Jobs(t, b.app.Effects.Client(), reminders.EscalationArgs{}.Kind())
	if len(jobs) != 1 {
		t.Fatalf("%d escalation jobs", len(jobs))
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		_ = b.fake.WaitHung(ctx, 1)
		cancel() // the caller gives up: result unknown
	}()
	if err := b.app.Effects.WorkJob(ctx, jobs[0]); err == nil {
		t.Fatal("a timed-out post reported success")
	}
	b.clock.Advance(2 * time.Minute)
	if err := b.app.Effects.WorkJob(t.Context(), jobs[0]); err != nil {
		t.Fatal(err)
	}
	if n := len(b.fake.Messages(escChannel)); n != 1 {
		t.Fatalf("%d escalation posts, want 1", n)
	}
	if b.fake.CallCount("conversations.history") == 0 {
		t.Fatal("no lookup before the retry")
	}
}

// TestNoEscalationDestinationNoJob: without an escalation destination an escalation queues no job
// and calls no Slack method; the thread still gets its SLA replies.
func TestNoEscalationDestinationNoJob(t *testing.T) {
	t.Parallel()
	b := setup(t, apptest.Backends[0].Config(t), "internal")
	id := slaBreached(t, b)
	if n := len(apptest.Jobs(t, b.app.Effects.Client(), reminders.EscalationArgs{}.Kind())); n != 0 {
		t.Fatalf("%d escalation jobs without a destination", n)
	}
	if n := len(b.fake.Messages(escChannel)); n != 0 {
		t.Fatalf("%d posts in the escalation channel", n)
	}
	if n := len(b.reminderReplies(t, id)); n != 2 {
		t.Fatalf("%d SLA replies, want 2", n)
	}
}

// TestReminderReplyRecoveredUnderHistoryLimits: against Slack's limits for apps outside the
// Marketplace (conversations.replies: 15 messages a call, one call a minute), a reminder reply
// whose post had an unknown outcome in a busy thread is found and adopted, never posted twice: the
// lookup reads the attempt's own window of the thread, and resumes after a 429 above what it read.
func TestReminderReplyRecoveredUnderHistoryLimits(t *testing.T) {
	t.Parallel()
	b := setupWith(t, apptest.Backends[0].Config(t), "internal", fakeslack.Options{NonMarketplace: true})
	id := followUpFired(t, b, "k1")
	noErrors(t, b.work(t, threads.SyncArgs{}.Kind()))
	root := b.root(t, id).TS
	people := func(n int) {
		for range n {
			b.clock.Advance(time.Second)
			if _, err := b.fake.InjectMessage(channel, fakeslack.Message{ThreadTS: root, Text: "on it"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	people(20) // twenty replies in the minute before the reminder: more than one page of the window
	posts := b.fake.CallCount("chat.postMessage")
	b.fake.FailNext("chat.postMessage", fakeslack.DropAfterApply())
	if errs := b.sync(t); len(errs) != 1 || errs[0] == nil {
		t.Fatalf("dropped post: errors %v, want one", errs)
	}
	people(10)
	b.clock.Advance(10 * time.Minute)
	people(30) // and more after the window
	j := apptest.Jobs(t, b.app.Effects.Client(), reminders.ReminderArgs{}.Kind())[0]
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("the lookup did not converge in 10 runs")
		}
		b.clock.Advance(2 * time.Minute) // past the in-flight guard, the cooldown and the rate-limit minute
		if err := b.app.Effects.WorkJob(t.Context(), j); err == nil {
			break
		}
	}
	if n := len(b.reminderReplies(t, id)); n != 1 {
		t.Fatalf("%d reminder replies, want 1", n)
	}
	if n := b.fake.CallCount("chat.postMessage") - posts; n != 1 {
		t.Fatalf("%d posts for one reminder, want 1", n)
	}
	limited := 0
	for _, c := range b.fake.Calls() {
		if c.Method == "conversations.replies" && c.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("the lookup never met the rate limit: the window was one page")
	}
}

// TestSLARepliesLeaveDisabledWatcherOut: a watcher disabled after being added is not mentioned by
// the inquiry's SLA warning and breach replies, as a disabled principal is left out of a
// follow-up's recipients: its Slack user is no longer told about the inquiry. On SQLite and
// Postgres.
func TestSLARepliesLeaveDisabledWatcherOut(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := setup(t, cfg, "internal")
		ctx := t.Context()
		if _, _, err := b.app.Commands.SetSLAPolicy(ctx, commands.SetSLAPolicy{Tenant: b.tenant, Actor: b.admin, Policy: []byte(policy)}); err != nil {
			t.Fatal(err)
		}
		id := apptest.Intake(t, b.app, b.tenant, "k1")
		if _, err := b.app.Commands.AddWatcher(ctx, commands.AddWatcher{Target: b.target(id, b.olga), Principal: b.bob.ID}); err != nil {
			t.Fatal(err)
		}
		disable := true
		if _, _, err := b.app.Tenancy.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: b.bob.ID, Disable: &disable, Reason: "left"}); err != nil {
			t.Fatal(err)
		}
		noErrors(t, b.sync(t))
		b.clock.Advance(31 * time.Minute)
		b.tick(t) // warning
		noErrors(t, b.sync(t))
		b.clock.Advance(30 * time.Minute)
		b.tick(t) // breach
		noErrors(t, b.sync(t))
		reps := b.reminderReplies(t, id)
		if len(reps) != 2 {
			t.Fatalf("replies = %s", raw(t, reps))
		}
		if got := raw(t, reps); strings.Contains(got, bobSlack) || strings.Contains(got, "Bob") {
			t.Fatalf("the SLA replies mention the disabled watcher: %s", got)
		}
	})
}

// TestDisabledPrincipalNotMentioned: a principal disabled after it became a follow-up's recipient
// or the inquiry's owner is not pinged: the follow-up reply, the SLA replies and the escalation
// post still say the inquiry is due (or escalated) but mention neither the disabled owner nor the
// disabled watcher, count them nowhere, and leave the escalation without an owner line; the
// others are still addressed. The control run, nobody disabled, mentions the owner in each.
func TestDisabledPrincipalNotMentioned(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := setup(t, cfg, "internal")
		id := followUpFired(t, b, "k1") // owner and setter Olga; watchers Bob (linked) and Carl (unlinked)
		disable := true
		for _, p := range []domain.Principal{b.olga, b.bob} {
			if _, _, err := b.app.Tenancy.ChangePrincipal(t.Context(), tenancy.PrincipalChange{Slug: "acme", ID: p.ID, Disable: &disable, Reason: "left"}); err != nil {
				t.Fatal(err)
			}
		}
		noErrors(t, b.sync(t))
		reps := b.reminderReplies(t, id)
		if len(reps) != 1 || !strings.HasPrefix(reps[0].Text, "Follow-up due") {
			t.Fatalf("replies = %s, want the one follow-up reply", raw(t, reps))
		}
		got := raw(t, reps[0])
		if strings.Contains(got, olgaSlack) || strings.Contains(got, bobSlack) || !strings.Contains(got, "1 without a linked Slack account") {
			t.Fatalf("the follow-up reply, owner and one watcher disabled: %s", got)
		}
	})
	for _, disabled := range []bool{false, true} {
		t.Run(map[bool]string{false: "escalation control", true: "escalation owner disabled"}[disabled], func(t *testing.T) {
			t.Parallel()
			b := setup(t, apptest.Backends[0].Config(t), "internal")
			b.escalateTo(t, "internal")
			ctx := t.Context()
			if _, _, err := b.app.Commands.SetSLAPolicy(ctx, commands.SetSLAPolicy{Tenant: b.tenant, Actor: b.admin, Policy: []byte(policy)}); err != nil {
				t.Fatal(err)
			}
			id := apptest.Intake(t, b.app, b.tenant, "k1")
			if _, err := b.app.Commands.Claim(ctx, commands.Claim{Target: b.target(id, b.olga)}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.app.Commands.AddWatcher(ctx, commands.AddWatcher{Target: b.target(id, b.olga), Principal: b.bob.ID}); err != nil {
				t.Fatal(err)
			}
			if disabled {
				yes := true
				if _, _, err := b.app.Tenancy.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: b.olga.ID, Disable: &yes, Reason: "left"}); err != nil {
					t.Fatal(err)
				}
			}
			noErrors(t, b.sync(t))
			b.clock.Advance(2*time.Hour + time.Minute)
			b.tick(t) // resolution warning
			noErrors(t, b.sync(t))
			b.clock.Advance(2 * time.Hour)
			b.tick(t) // breach
			b.tick(t) // escalation, due at the breach
			noErrors(t, b.sync(t))
			reps := b.reminderReplies(t, id)
			if len(reps) != 2 || !strings.HasPrefix(reps[0].Text, "SLA warning") || !strings.HasPrefix(reps[1].Text, "SLA breached") {
				t.Fatalf("replies = %s", raw(t, reps))
			}
			posts := b.fake.Messages(escChannel)
			if len(posts) != 1 || !strings.Contains(raw(t, posts[0]), "Escalated: inquiry") {
				t.Fatalf("escalation posts = %s", raw(t, posts))
			}
			esc := raw(t, posts[0])
			for i, text := range []string{raw(t, reps[0]), raw(t, reps[1]), esc} {
				if !strings.Contains(text, bobSlack) && i < 2 {
					t.Errorf("the enabled watcher is not mentioned: %s", text)
				}
				if mentioned := strings.Contains(text, olgaSlack); mentioned == disabled {
					t.Errorf("owner disabled %v, mentioned %v: %s", disabled, mentioned, text)
				}
			}
			if hasOwner := strings.Contains(esc, "Owner:"); hasOwner == disabled {
				t.Errorf("owner disabled %v, escalation owner line %v: %s", disabled, hasOwner, esc)
			}
		})
	}
}

// TestErasureDeletesEscalationPost: an escalation posted at personal clearance names the
// requester and the subject; erasing the inquiry deletes the post, as it deletes the thread, so
// the escalation channel keeps nothing of the erased inquiry. On SQLite and Postgres.
func TestErasureDeletesEscalationPost(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := setup(t, cfg, "internal")
		b.escalateTo(t, "personal")
		id := slaBreached(t, b)
		if got := raw(t, b.fake.Messages(escChannel)); !strings.Contains(got, "Ada Lovelace") {
			t.Fatalf("the personal escalation post does not name the requester: %s", got)
		}
		if _, err := b.app.Commands.Erase(t.Context(), commands.Erase{Target: b.target(id, b.admin)}); err != nil {
			t.Fatal(err)
		}
		noErrors(t, b.work(t, threads.SyncArgs{}.Kind(), reminders.EscalationEraseArgs{}.Kind()))
		for _, m := range b.fake.Messages(escChannel) {
			if m.Subtype != "tombstone" {
				t.Fatalf("the escalation channel keeps a post of the erased inquiry: %s %q", m.TS, m.Text)
			}
		}
		for _, j := range apptest.Jobs(t, b.app.Effects.Client(), reminders.EscalationEraseArgs{}.Kind()) {
			if err := b.app.Effects.WorkJob(t.Context(), j); err != nil { // again: nothing more to do
				t.Fatal(err)
			}
		}
		if n := b.fake.CallCount("chat.delete"); n == 0 {
			t.Fatal("no chat.delete")
		}
	})
}
