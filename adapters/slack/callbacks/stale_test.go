package callbacks_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// clickValue is click with the element's value as the root message rendered it.
func clickValue(user, ts, action, actionTS, value, responseURL string) string {
	return strings.Replace(click(team, user, ts, action, actionTS, responseURL), `"value":"CB-IGNORED"`, `"value":"`+value+`"`, 1)
}

// rootValue is the value the root message in the fake gives action (a button, or the status
// select's option for status).
func rootValue(t *testing.T, b *bundle, ts, action, status string) string {
	t.Helper()
	for _, m := range b.fake.Messages(channel) {
		if m.TS != ts {
			continue
		}
		var blocks []struct {
			Elements []struct {
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
				Options  []struct {
					Value string `json:"value"`
				} `json:"options"`
			} `json:"elements"`
		}
		if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
			t.Fatal(err)
		}
		for _, bl := range blocks {
			for _, e := range bl.Elements {
				if e.ActionID != action {
					continue
				}
				if status == "" {
					return e.Value
				}
				for _, o := range e.Options {
					if strings.HasPrefix(o.Value, status+"@") {
						return o.Value
					}
				}
			}
		}
	}
	t.Fatalf("the root %s has no %s %s", ts, action, status)
	return ""
}

// syncJobsAt counts the thread effect jobs of inquiry id at version.
func syncJobsAt(t *testing.T, b *bundle, id domain.InquiryID, version uint64) int {
	t.Helper()
	n := 0
	for _, j := range apptest.Jobs(t, b.app.Effects.Client(), threads.SyncArgs{}.Kind()) {
		var a threads.SyncArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.Inquiry == id && a.Version == version {
			n++
		}
	}
	return n
}

// TestStaleClickByRenderedVersion: the root's elements carry the version they were rendered at. A
// click on an element of an older message is refused ("changed by <name> — refresh"), appends
// nothing, is audited (version_mismatch), and queues the message's re-render at the current
// version through the effect runtime under the thread effect's own key (the subscriber's job for
// that version is the same job); the re-rendered root's elements work. "Add note" still opens its
// form on an older message, and an element without a version (rendered before versions) is taken
// as before.
func TestStaleClickByRenderedVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	old := rootValue(t, b, ts, callbacks.ActionClaim, "")
	oldMe := rootValue(t, b, ts, callbacks.ActionAssignMe, "")
	oldStatus := rootValue(t, b, ts, callbacks.ActionStatus, "triaged")
	if !strings.HasSuffix(old, "@v1") || !strings.HasSuffix(oldStatus, "@v1") {
		t.Fatalf("rendered values %q, %q: want version 1", old, oldStatus)
	}
	tgt := commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.bob, IdempotencyKey: "bob-claim"}
	if _, err := b.app.Commands.Claim(t.Context(), commands.Claim{Target: tgt}); err != nil {
		t.Fatal(err)
	}
	cur := b.inquiry(t, id).Version // 3: assigned, in progress
	before := apptest.LogLen(t, b.app)

	b.interact(t, clickValue("U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000001", old, b.respURL))
	if r := b.reply(t); r != "This inquiry was changed (now in_progress, owned by Bob) — refresh and try again." {
		t.Fatalf("stale claim before the query model caught up = %q", r)
	}
	if n := syncJobsAt(t, b, id, cur); n != 1 {
		t.Fatalf("%d re-render jobs at version %d, want 1", n, cur)
	}
	b.project(t) // the query model names Bob; the subscriber queues its own job for version 3
	if n := syncJobsAt(t, b, id, cur); n != 1 {
		t.Fatalf("%d re-render jobs at version %d after the subscriber ran, want the same one", n, cur)
	}
	for i, c := range []struct{ action, value string }{{callbacks.ActionStatus, oldStatus}, {callbacks.ActionAssignMe, oldMe}} {
		b.interact(t, clickValue("U0OLGA0001", ts, c.action, "1793523600.00001"+string(rune('0'+i)), c.value, b.respURL))
		if r := b.reply(t); r != "This inquiry was changed by Bob (now in_progress, owned by Bob) — refresh and try again." {
			t.Fatalf("stale %s = %q", c.action, r)
		}
	}
	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("stale clicks appended: %d → %d events", before, n)
	}
	entries, err := b.app.Audit.Entries(t.Context(), b.tenant, 20)
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, e := range entries {
		if e.Code == callbacks.RefusedStale && e.Command == "slack_interaction" && e.Actor == b.olga.ID && e.InquiryID == id {
			stale++
		}
	}
	if stale != 3 {
		t.Fatalf("audit = %+v, want 3 version_mismatch refusals", entries)
	}

	// "Add note" opens its form on the older message.
	trig := b.fake.IssueTrigger()
	note := strings.Replace(clickTrigger(team, "U0OLGA0001", ts, callbacks.ActionNote, "1793523600.000020", trig, b.respURL), "CB-IGNORED", old, 1)
	if rec := b.interact(t, note); rec.Code != 200 {
		t.Fatalf("note on an older message = %d", rec.Code)
	}
	ctx := t.Context()
	if _, err := b.fake.WaitViews(ctx, 1); err != nil {
		t.Fatalf("no note form opened: %v", err)
	}

	// The re-rendered root carries the current version, and its elements work.
	b.sync(t)
	fresh := rootValue(t, b, ts, callbacks.ActionResolve, "")
	if !strings.HasSuffix(fresh, "@v3") {
		t.Fatalf("re-rendered value %q, want version 3", fresh)
	}
	b.interact(t, clickValue("U0OLGA0001", ts, callbacks.ActionResolve, "1793523600.000030", fresh, b.respURL))
	if r := b.reply(t); r != "Moved to resolved." {
		t.Fatalf("resolve on the current message = %q", r)
	}
	// An element without a version is taken as before.
	b.interact(t, clickValue("U0OLGA0001", ts, callbacks.ActionStatus, "1793523600.000031", "in_progress", b.respURL))
	if r := b.reply(t); r != "Moved to in_progress." {
		t.Fatalf("unversioned status option = %q", r)
	}
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// texts is every string a Slack message shows (its text and every string in its blocks), replies
// included.
func texts(t *testing.T, ms []fakeslack.Message) []string {
	t.Helper()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, m := range ms {
		out = append(out, m.Text)
		if len(m.Blocks) > 0 {
			var v any
			if err := json.Unmarshal(m.Blocks, &v); err != nil {
				t.Fatal(err)
			}
			walk(v)
		}
		out = append(out, texts(t, m.Replies)...)
	}
	return out
}

// TestOwnerShownAsMention: in the thread root and its update replies an owner is the mention of
// their linked Slack user; an owner without a link in this installation is, at internal
// clearance, "someone without a linked Slack account" (a display name is personal data); no
// posted text holds a principal id or any other UUID.
func TestOwnerShownAsMention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	b.interact(t, click(team, "U0OLGA0001", ts, callbacks.ActionClaim, "1793523600.000001", b.respURL))
	if r := b.reply(t); r != "You claimed this inquiry." {
		t.Fatalf("claim = %q", r)
	}
	b.sync(t)
	all := strings.Join(texts(t, b.fake.Messages(channel)), "\n")
	if !strings.Contains(all, "*Owner:* <@U0OLGA0001>") || !strings.Contains(all, "Owner: <@U0OLGA0001>") {
		t.Fatalf("root and reply do not mention the owner:\n%s", all)
	}
	// Bob, not linked in this installation, becomes the owner.
	if _, err := b.app.Slack.UnlinkUser(t.Context(), b.tenant, "", "U0BOB00001", "cli:test"); err != nil {
		t.Fatal(err)
	}
	tgt := commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.olga, IdempotencyKey: "assign-bob"}
	if _, err := b.app.Commands.Assign(t.Context(), commands.Assign{Target: tgt, Owner: b.bob.ID}); err != nil {
		t.Fatal(err)
	}
	b.sync(t)
	all = strings.Join(texts(t, b.fake.Messages(channel)), "\n")
	if !strings.Contains(all, "*Owner:* someone without a linked Slack account") || strings.Contains(all, "Bob") {
		t.Fatalf("an unlinked owner at internal clearance:\n%s", all)
	}
	if u := uuidRE.FindString(all); u != "" {
		t.Fatalf("a posted text holds the id %s:\n%s", u, all)
	}
	for _, p := range []domain.PrincipalID{b.olga.ID, b.bob.ID} {
		if strings.Contains(all, string(p)) {
			t.Fatalf("a posted text holds principal id %s", p)
		}
	}
}

// submitView is submit of the view v as Slack sends it back: with v's own private_metadata.
func submitView(user, ts string, v fakeslack.View, input, value string) string {
	return strings.Replace(submit(user, ts, v.CallbackID, v.ID, input, value), `"private_metadata":"`+channel+" "+ts+`"`,
		`"private_metadata":"`+v.PrivateMetadata+`"`, 1)
}

// TestStaleFormSubmission: the assign and cancel forms carry the version of the message they
// were opened from; a submission after the inquiry changed is refused in the form ("changed by …
// — refresh"), appends nothing, and is audited; a form opened from the current message saves. The
// note form carries no version.
func TestStaleFormSubmission(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ts := b.posted(t, "k1")
	open := func(action string, n int) fakeslack.View {
		t.Helper()
		trig := b.fake.IssueTrigger()
		click := strings.Replace(clickTrigger(team, "U0OLGA0001", ts, action, "1793523600.00010"+string(rune('0'+n)), trig, b.respURL),
			"CB-IGNORED", rootValue(t, b, ts, action, ""), 1)
		if rec := b.interact(t, click); rec.Code != 200 {
			t.Fatalf("%s click = %d", action, rec.Code)
		}
		views, err := b.fake.WaitViews(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		return views[n-1]
	}
	assign, note := open(callbacks.ActionAssign, 1), open(callbacks.ActionNote, 2)
	if assign.PrivateMetadata != channel+" "+ts+" v1" || note.PrivateMetadata != channel+" "+ts {
		t.Fatalf("forms' metadata %q, %q", assign.PrivateMetadata, note.PrivateMetadata)
	}
	tgt := commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.bob, IdempotencyKey: "bob-claim"}
	if _, err := b.app.Commands.Claim(t.Context(), commands.Claim{Target: tgt}); err != nil {
		t.Fatal(err)
	}
	before := apptest.LogLen(t, b.app)
	rec := b.interact(t, submitView("U0OLGA0001", ts, assign, "owner", "U0OLGA0001"))
	if !strings.Contains(rec.Body.String(), `"response_action":"errors"`) || !strings.Contains(rec.Body.String(), "refresh and try again") {
		t.Fatalf("assign from a form opened before the change = %d %s", rec.Code, rec.Body)
	}
	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("a stale form appended: %d → %d", before, n)
	}
	if q := b.inquiry(t, id); q.Owner != b.bob.ID {
		t.Fatalf("owner %s, want Bob's claim kept", q.Owner)
	}
	// The note form saves whatever the version.
	if rec := b.interact(t, submitView("U0OLGA0001", ts, note, "note", "called back")); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("note = %d %s", rec.Code, rec.Body)
	}
	// A form opened from the current message saves.
	b.sync(t)
	fresh := open(callbacks.ActionAssign, 3)
	if !strings.HasSuffix(fresh.PrivateMetadata, " v4") {
		t.Fatalf("fresh form metadata %q", fresh.PrivateMetadata)
	}
	if rec := b.interact(t, submitView("U0OLGA0001", ts, fresh, "owner", "U0OLGA0001")); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("assign from a current form = %d %s", rec.Code, rec.Body)
	}
	if q := b.inquiry(t, id); q.Owner != b.olga.ID {
		t.Fatalf("owner %s, want Olga", q.Owner)
	}
}
