package fakeslack_test

import (
	"testing"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestConversationsReplies: the parent first, then replies oldest first, paged with a cursor;
// metadata only when asked for; an unknown thread is thread_not_found.
func TestConversationsReplies(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	_, root, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("root", false))
	if err != nil {
		t.Fatal(err)
	}
	md := slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "casebook_effect", EventPayload: map[string]any{"key": "k2"}})
	var replies []string
	for i, opts := range [][]slack.MsgOption{{}, {md}, {}} {
		_, ts, err := b.api.PostMessageContext(ctx, testChannel, append(opts, slack.MsgOptionText("reply", false), slack.MsgOptionTS(root))...)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		replies = append(replies, ts)
	}
	msgs, more, next, err := b.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: replies[0], Limit: 2, IncludeAllMetadata: true})
	if err != nil || !more || next == "" || len(msgs) != 2 || msgs[0].Timestamp != root || msgs[1].Timestamp != replies[0] {
		t.Fatalf("first page: %d messages, more %v, cursor %q, %v", len(msgs), more, next, err)
	}
	msgs, more, _, err = b.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: root, Limit: 2, Cursor: next, IncludeAllMetadata: true})
	if err != nil || more || len(msgs) != 2 || msgs[0].Timestamp != replies[1] || msgs[1].Timestamp != replies[2] {
		t.Fatalf("second page: %d messages, more %v, %v", len(msgs), more, err)
	}
	if msgs[0].Metadata.EventPayload["key"] != "k2" {
		t.Fatalf("metadata = %+v", msgs[0].Metadata)
	}
	msgs, _, _, err = b.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: root})
	if err != nil || len(msgs) != 4 || msgs[2].Metadata.EventType != "" {
		t.Fatalf("without include_all_metadata: %d messages, metadata %+v, %v", len(msgs), msgs[2].Metadata, err)
	}
	if _, _, _, err := b.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: "1.000001"}); slackCode(err) != fakeslack.CodeThreadNotFound {
		t.Fatalf("unknown thread: %v", err)
	}
	if _, _, _, err := b.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: root, Cursor: "bogus"}); slackCode(err) != fakeslack.CodeInvalidCursor {
		t.Fatalf("bad cursor: %v", err)
	}
}
