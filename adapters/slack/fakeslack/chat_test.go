package fakeslack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"
)

func TestAuthTest(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{TeamID: "T0ACME00001"})

	resp, err := b.api.AuthTestContext(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if resp.TeamID != "T0ACME00001" || resp.UserID != b.srv.BotUserID() || resp.BotID != b.srv.BotID() {
		t.Errorf("auth.test = %+v", resp)
	}
}

func TestPostMessageThreadsBlocksAndMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	md := slack.SlackMetadata{EventType: "casebook_inquiry", EventPayload: map[string]any{"inquiry_id": "inq-1", "version": float64(3)}}

	ch, rootTS, err := b.api.PostMessageContext(ctx, testChannel,
		slack.MsgOptionText("New inquiry", false),
		slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*New inquiry*", false, false), nil, nil)),
		slack.MsgOptionMetadata(md))
	if err != nil {
		t.Fatal(err)
	}
	if ch != testChannel || rootTS != "1700000000.000100" {
		t.Errorf("post = %s %s, want %s 1700000000.000100", ch, rootTS, testChannel)
	}
	_, replyTS, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("claimed", false), slack.MsgOptionTS(rootTS))
	if err != nil {
		t.Fatal(err)
	}
	// A reply to a reply joins the root's thread.
	_, _, reply2, err := b.api.PostMessageWithResponseContext(ctx, testChannel, slack.MsgOptionText("resolved", false), slack.MsgOptionTS(replyTS))
	if err != nil {
		t.Fatal(err)
	}
	if reply2.ThreadTimestamp != rootTS {
		t.Errorf("reply to reply thread_ts = %s, want %s", reply2.ThreadTimestamp, rootTS)
	}

	hist, err := b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel, IncludeAllMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Messages) != 1 {
		t.Fatalf("history has %d top-level messages, want 1", len(hist.Messages))
	}
	root := hist.Messages[0]
	if diff := cmp.Diff(md, root.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if root.ReplyCount != 2 || root.ThreadTimestamp != rootTS || root.LatestReply == "" {
		t.Errorf("root thread fields: reply_count=%d thread_ts=%s latest=%s", root.ReplyCount, root.ThreadTimestamp, root.LatestReply)
	}
	if len(root.Blocks.BlockSet) != 1 || root.Blocks.BlockSet[0].BlockType() != slack.MBTSection {
		t.Errorf("blocks = %+v", root.Blocks.BlockSet)
	}
	if root.BotID != b.srv.BotID() || root.User != b.srv.BotUserID() {
		t.Errorf("author = %s/%s", root.User, root.BotID)
	}

	// Without include_all_metadata the metadata stays out (our reading of the docs).
	plain, err := b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Messages[0].Metadata.EventType != "" {
		t.Errorf("metadata without include_all_metadata: %+v", plain.Messages[0].Metadata)
	}

	got := b.srv.Messages(testChannel)
	if len(got) != 1 || len(got[0].Replies) != 2 {
		t.Fatalf("Messages = %+v", got)
	}
	if got[0].Metadata == nil || got[0].Metadata.EventPayload["inquiry_id"] != "inq-1" {
		t.Errorf("stored metadata = %+v", got[0].Metadata)
	}
	if got[0].Replies[1].Text != "resolved" || got[0].Replies[1].ThreadTS != rootTS {
		t.Errorf("second reply = %+v", got[0].Replies[1])
	}
}

func TestPostMessageErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()

	_, _, err := b.api.PostMessageContext(ctx, "C0NOSUCHCH1", slack.MsgOptionText("x", false))
	if got := slackCode(err); got != fakeslack.CodeChannelNotFound {
		t.Errorf("unknown channel: %v", err)
	}
	_, _, err = b.api.PostMessageContext(ctx, testChannel)
	if got := slackCode(err); got != fakeslack.CodeNoText {
		t.Errorf("no text: %v", err)
	}
	a := b.postJSON(t, "chat.postMessage", b.srv.Token(), map[string]any{
		"channel": testChannel, "text": "x", "metadata": map[string]any{"event_payload": map[string]any{}},
	})
	if a.errCode() != fakeslack.CodeInvalidMetadata {
		t.Errorf("metadata without event_type: %+v", a.body)
	}
	if n := len(b.srv.Messages(testChannel)); n != 0 {
		t.Errorf("%d messages stored after failed posts", n)
	}
}

func TestPostMessageAsJSONWithBearerToken(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})

	a := b.postJSON(t, "chat.postMessage", b.srv.Token(), map[string]any{
		"channel": testChannel, "text": "hello",
		"blocks":   []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "hello"}}},
		"metadata": map[string]any{"event_type": "casebook_inquiry", "event_payload": map[string]any{"inquiry_id": "inq-9"}},
	})
	if a.body["ok"] != true {
		t.Fatalf("answer = %+v", a.body)
	}
	m, ok := b.srv.Message(testChannel, a.body["ts"].(string))
	if !ok || m.Metadata == nil || m.Metadata.EventPayload["inquiry_id"] != "inq-9" || !strings.Contains(string(m.Blocks), "section") {
		t.Errorf("stored = %+v", m)
	}
}

func TestUpdateMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	_, ts, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("v1", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "casebook_inquiry", EventPayload: map[string]any{"version": "1"}}))
	if err != nil {
		t.Fatal(err)
	}

	_, _, text, err := b.api.UpdateMessageContext(ctx, testChannel, ts, slack.MsgOptionText("v2", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "casebook_inquiry", EventPayload: map[string]any{"version": "2"}}))
	if err != nil || text != "v2" {
		t.Fatalf("update = %q, %v", text, err)
	}
	m, _ := b.srv.Message(testChannel, ts)
	if m.Text != "v2" || m.Metadata.EventPayload["version"] != "2" || m.EditedTS == "" {
		t.Errorf("after update: %+v", m)
	}

	_, _, _, err = b.api.UpdateMessageContext(ctx, testChannel, "1700000001.000000", slack.MsgOptionText("x", false))
	if got := slackCode(err); got != fakeslack.CodeMessageNotFound {
		t.Errorf("update unknown ts: %v", err)
	}
	human, err := b.srv.InjectMessage(testChannel, fakeslack.Message{User: "U0OPERATOR1", Text: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = b.api.UpdateMessageContext(ctx, testChannel, human, slack.MsgOptionText("x", false))
	if got := slackCode(err); got != fakeslack.CodeCantUpdateMessage {
		t.Errorf("update a person's message: %v", err)
	}
}

func TestDeleteMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	_, lone, _ := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("lone", false))
	_, root, _ := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("root", false))
	_, reply, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("reply", false), slack.MsgOptionTS(root))
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := b.api.DeleteMessageContext(ctx, testChannel, lone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.api.DeleteMessageContext(ctx, testChannel, lone); slackCode(err) != fakeslack.CodeMessageNotFound {
		t.Errorf("second delete: %v", err)
	}
	// A parent with replies stays as a tombstone until its last reply goes.
	if _, _, err := b.api.DeleteMessageContext(ctx, testChannel, root); err != nil {
		t.Fatal(err)
	}
	msgs := b.srv.Messages(testChannel)
	if len(msgs) != 1 || msgs[0].Subtype != "tombstone" || len(msgs[0].Replies) != 1 {
		t.Fatalf("after deleting parent: %+v", msgs)
	}
	if _, _, err := b.api.DeleteMessageContext(ctx, testChannel, reply); err != nil {
		t.Fatal(err)
	}
	if msgs := b.srv.Messages(testChannel); len(msgs) != 0 {
		t.Errorf("after deleting last reply: %+v", msgs)
	}

	human, _ := b.srv.InjectMessage(testChannel, fakeslack.Message{User: "U0OPERATOR1", Text: "mine"})
	if _, _, err := b.api.DeleteMessageContext(ctx, testChannel, human); slackCode(err) != fakeslack.CodeCantDeleteMessage {
		t.Errorf("delete a person's message: %v", err)
	}
}

func TestHistoryPagination(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	var posted []string
	for i := range 7 {
		_, ts, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText(strings.Repeat("m", i+1), false))
		if err != nil {
			t.Fatal(err)
		}
		posted = append(posted, ts)
	}
	// Thread replies are not top-level history.
	if _, _, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("reply", false), slack.MsgOptionTS(posted[0])); err != nil {
		t.Fatal(err)
	}

	var seen []string
	var pages []int
	cursor := ""
	for {
		h, err := b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel, Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, len(h.Messages))
		for _, m := range h.Messages {
			seen = append(seen, m.Timestamp)
		}
		if h.HasMore != (h.ResponseMetaData.NextCursor != "") {
			t.Errorf("has_more=%v with next_cursor %q", h.HasMore, h.ResponseMetaData.NextCursor)
		}
		cursor = h.ResponseMetaData.NextCursor
		if cursor == "" {
			break
		}
	}
	want := make([]string, 0, len(posted))
	for i := len(posted) - 1; i >= 0; i-- {
		want = append(want, posted[i])
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("newest-first ts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3, 3, 1}, pages); diff != "" {
		t.Errorf("page sizes (-want +got):\n%s", diff)
	}

	// oldest and latest are exclusive unless inclusive is set.
	h, err := b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel, Oldest: posted[1], Latest: posted[4]})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2 || h.Messages[0].Timestamp != posted[3] || h.Messages[1].Timestamp != posted[2] {
		t.Errorf("oldest/latest window = %d messages", len(h.Messages))
	}
	h, err = b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel, Oldest: posted[1], Latest: posted[4], Inclusive: true})
	if err != nil || len(h.Messages) != 4 {
		t.Errorf("inclusive window: %v, %d messages", err, len(h.Messages))
	}

	_, err = b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel, Cursor: "bm9wZQ=="})
	if slackCode(err) != fakeslack.CodeInvalidCursor {
		t.Errorf("bad cursor: %v", err)
	}
	_, err = b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C0NOSUCHCH1"})
	if slackCode(err) != fakeslack.CodeChannelNotFound {
		t.Errorf("unknown channel: %v", err)
	}
}

func TestTimestampsAreUniqueAndIncreasing(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	var got []string
	for range 3 {
		_, ts, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ts)
	}
	b.clock.Advance(2_500_000_000) // 2.5s
	_, ts, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false))
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, ts)
	want := []string{"1700000000.000100", "1700000000.000200", "1700000000.000300", "1700000002.500100"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ts (-want +got):\n%s", diff)
	}
}

func TestHandEditedMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	_, root, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("ours", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "casebook_inquiry", EventPayload: map[string]any{"inquiry_id": "inq-1"}}))
	if err != nil {
		t.Fatal(err)
	}

	// A person replies in the thread, and someone forges our metadata from another bot.
	if _, err := b.srv.InjectMessage(testChannel, fakeslack.Message{User: "U0OPERATOR1", Text: "on it", ThreadTS: root}); err != nil {
		t.Fatal(err)
	}
	forged, err := b.srv.InjectMessage(testChannel, fakeslack.Message{
		BotID: "B0OTHERBOT1", Text: "ours?",
		Metadata: &fakeslack.Metadata{EventType: "casebook_inquiry", EventPayload: map[string]any{"inquiry_id": "inq-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.srv.EditMessage(testChannel, root, func(m *fakeslack.Message) { m.Text = "edited by a person" }); err != nil {
		t.Fatal(err)
	}

	h, err := b.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: testChannel, IncludeAllMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2 {
		t.Fatalf("history = %d messages", len(h.Messages))
	}
	if h.Messages[0].Timestamp != forged || h.Messages[0].BotID != "B0OTHERBOT1" || h.Messages[0].Metadata.EventPayload["inquiry_id"] != "inq-1" {
		t.Errorf("forgery = %+v", h.Messages[0].Msg)
	}
	if h.Messages[1].Text != "edited by a person" || h.Messages[1].ReplyCount != 1 {
		t.Errorf("root = %+v", h.Messages[1].Msg)
	}

	if err := b.srv.RemoveMessage(testChannel, forged); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.RemoveMessage(testChannel, forged); !errors.Is(err, fakeslack.ErrNotFound) {
		t.Errorf("second RemoveMessage: %v", err)
	}
	if _, err := b.srv.InjectMessage("C0NOSUCHCH1", fakeslack.Message{Text: "x"}); !errors.Is(err, fakeslack.ErrNotFound) {
		t.Errorf("InjectMessage into unknown channel: %v", err)
	}
}

func TestAutoCreateChannels(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{AutoCreateChannels: true})
	if _, _, err := b.api.PostMessageContext(t.Context(), "C0DEVCHAN01", slack.MsgOptionText("x", false)); err != nil {
		t.Fatal(err)
	}
	if n := len(b.srv.Messages("C0DEVCHAN01")); n != 1 {
		t.Errorf("auto-created channel holds %d messages", n)
	}
	id := b.srv.NewChannel()
	if !strings.HasPrefix(id, "C") || len(id) != 11 {
		t.Errorf("NewChannel = %q", id)
	}
}
