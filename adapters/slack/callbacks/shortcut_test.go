package callbacks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
)

// shortcut is a message_action payload: user used "Create inquiry" (or callback) on the message
// ts of the channel, written by author (empty: a bot's message).
func shortcut(callback, user, ch, ts, author, text, actionTS, responseURL string) string {
	return fmt.Sprintf(`{"type":"message_action","callback_id":%q,"team":{"id":%q,"domain":"fake"},"api_app_id":%q,
		"user":{"id":%q,"name":"x"},"channel":{"id":%q,"name":"ops"},"message_ts":%q,
		"message":{"type":"message","user":%q,"ts":%q,"text":%q},"trigger_id":"trig.%s","action_ts":%q,"response_url":%q}`,
		callback, team, appID, user, ch, ts, author, ts, text, actionTS, actionTS, responseURL)
}

// slackIntakeID is the inquiry a shortcut on the message (channel, ts) made, and its receipt.
func (b *bundle) slackIntakeID(t *testing.T, ch, ts string) (domain.InquiryID, string) {
	t.Helper()
	id, receipt, err := b.app.Commands.FindIntake(t.Context(), b.tenant, domain.SourceSlack, "slack-message:/"+team+"/"+appID+"/"+ch+"/"+ts)
	if err != nil {
		t.Fatal(err)
	}
	return id, receipt
}

// TestShortcutTwiceMakesOneInquiry: "Create inquiry" on a person's message records an inquiry
// with source slack, the text, the permalink and the author as requester, answers the user
// ephemerally with the receipt, and its thread is projected; a second shortcut on the message (by
// another user) says so and appends nothing.
func TestShortcutTwiceMakesOneInquiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	text := "Hello, my invoice is wrong\nIt charges me twice for March."
	ts, err := b.fake.InjectMessage(channel, fakeslack.Message{User: "U0ADA00001", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	if rec := b.interact(t, shortcut(callbacks.ShortcutCreateInquiry, "U0OLGA0001", channel, ts, "U0ADA00001", text, "1793523600.000001", b.respURL)); rec.Code != 200 {
		t.Fatalf("shortcut = %d %s", rec.Code, rec.Body)
	}
	r := b.reply(t) // the shortcut is answered once its intake is done
	id, receipt := b.slackIntakeID(t, channel, ts)
	if r != "Inquiry "+receipt+" created from this message." {
		t.Fatalf("reply = %q", r)
	}
	q := b.inquiry(t, id)
	wantLink := "https://casebook-fake.slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
	if q.Source != domain.SourceSlack || q.Subject != "Hello, my invoice is wrong" || q.Message != text || q.Permalink != wantLink ||
		q.Requester != (domain.Requester{SlackUser: "U0ADA00001"}) || q.SubmittedBy != b.olga.ID {
		t.Fatalf("inquiry = %+v", q)
	}
	before := apptest.LogLen(t, b.app)
	b.interact(t, shortcut(callbacks.ShortcutCreateInquiry, "U0BOB00001", channel, ts, "U0ADA00001", text+" (edited)", "1793523601.000001", b.respURL))
	if r := b.reply(t); r != "This message already has an inquiry: "+receipt+". Nothing new was created." {
		t.Fatalf("second reply = %q", r)
	}
	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("second shortcut appended: %d → %d", before, n)
	}
	// The inquiry is threaded like any other.
	b.sync(t)
	found := false
	for _, m := range b.fake.Messages(channel) {
		if got, err := b.app.Threads.ThreadByRoot(t.Context(), b.tenant, "/"+team+"/"+appID, channel, m.TS); err == nil && got == id {
			found = true
		}
	}
	if !found {
		t.Fatal("no thread root for the Slack inquiry")
	}
}

// TestShortcutRefusals: an unlinked user, a bot's message, an empty message, a message Slack
// cannot link and another callback id create nothing; a linked author is named.
func TestShortcutRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	human, err := b.fake.InjectMessage(channel, fakeslack.Message{User: "U0ADA00001", Text: "Please help"})
	if err != nil {
		t.Fatal(err)
	}
	bot, err := b.fake.InjectMessage(channel, fakeslack.Message{BotID: "B0OTHER0001", Text: "Deploy finished"})
	if err != nil {
		t.Fatal(err)
	}
	before := apptest.LogLen(t, b.app)
	cases := []struct{ name, user, ch, ts, author, text, want string }{
		{"unlinked user", "U0NOBODY01", channel, human, "U0ADA00001", "Please help", "Your Slack account is not linked"},
		{"bot message", "U0OLGA0001", channel, bot, "", "Deploy finished", "Only messages written by people"},
		{"no text", "U0OLGA0001", channel, human, "U0ADA00001", " \n ", "This message has no text"},
		{"unknown message", "U0OLGA0001", channel, "1700000000.000009", "U0ADA00001", "Ghost", "Could not reach Slack"},
	}
	for i, c := range cases {
		b.interact(t, shortcut(callbacks.ShortcutCreateInquiry, c.user, c.ch, c.ts, c.author, c.text, fmt.Sprintf("1793523700.00000%d", i), b.respURL))
		if r := b.reply(t); !strings.HasPrefix(r, c.want) {
			t.Errorf("%s: reply %q, want %q…", c.name, r, c.want)
		}
	}
	if rec := b.interact(t, shortcut("some_other_shortcut", "U0OLGA0001", channel, human, "U0ADA00001", "Please help", "1793523800.000001", b.respURL)); rec.Code != 200 {
		t.Fatalf("other callback = %d", rec.Code)
	}
	if n := apptest.LogLen(t, b.app); n != before {
		t.Fatalf("refused shortcuts appended: %d → %d", before, n)
	}
	// A linked author is named by their principal.
	bobs, err := b.fake.InjectMessage(channel, fakeslack.Message{User: "U0BOB00001", Text: "Customer called about order 7"})
	if err != nil {
		t.Fatal(err)
	}
	b.interact(t, shortcut(callbacks.ShortcutCreateInquiry, "U0OLGA0001", channel, bobs, "U0BOB00001", "Customer called about order 7", "1793523900.000001", b.respURL))
	if r := b.reply(t); !strings.HasSuffix(r, "created from this message.") {
		t.Fatalf("reply = %q", r)
	}
	id, _ := b.slackIntakeID(t, channel, bobs)
	if q := b.inquiry(t, id); q.Requester.Name != "Bob" || q.Requester.SlackUser != "U0BOB00001" || q.Requester.Email != "" {
		t.Fatalf("requester = %+v", q.Requester)
	}
}
