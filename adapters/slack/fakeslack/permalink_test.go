package fakeslack_test

import (
	"testing"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestGetPermalink: a stored message's permalink (a reply's names its thread); unknown channels
// and messages are refused with Slack's codes.
func TestGetPermalink(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	ts, err := b.srv.InjectMessage(testChannel, fakeslack.Message{User: "U0AUTHOR001", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := b.srv.InjectMessage(testChannel, fakeslack.Message{User: "U0AUTHOR001", Text: "again", ThreadTS: ts})
	if err != nil {
		t.Fatal(err)
	}
	link, err := b.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: testChannel, Ts: ts})
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://casebook-fake.slack.com/archives/" + testChannel + "/p" + ts[:10] + ts[11:]; link != want {
		t.Fatalf("permalink = %q, want %q", link, want)
	}
	link, err = b.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: testChannel, Ts: reply})
	if err != nil || link != "https://casebook-fake.slack.com/archives/"+testChannel+"/p"+reply[:10]+reply[11:]+"?cid="+testChannel+"&thread_ts="+ts {
		t.Fatalf("reply permalink = %q, %v", link, err)
	}
	if _, err := b.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "C0NOSUCH001", Ts: ts}); slackCode(err) != fakeslack.CodeChannelNotFound {
		t.Fatalf("unknown channel: %v", err)
	}
	if _, err := b.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: testChannel, Ts: "1.000001"}); slackCode(err) != fakeslack.CodeMessageNotFound {
		t.Fatalf("unknown message: %v", err)
	}
}
