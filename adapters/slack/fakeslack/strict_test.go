package fakeslack_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestListPermissionDenied: a bot without access to a List (never shared, or unshared by a
// person) is refused every slackLists.items call with permission_denied; read access allows
// items.list and items.info but not writes.
func TestListPermissionDenied(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	ctx := t.Context()
	info, err := b.srv.CreateList("By hand", fakeslack.Column{Key: "title", Primary: true})
	if err != nil {
		t.Fatal(err)
	}
	title := info.ColumnID("title")
	row, err := b.srv.AddRow(info.ID, "U0HUMAN0001", fakeslack.TextCell(title, "first"))
	if err != nil {
		t.Fatal(err)
	}
	create := func() error {
		_, err := b.api.CreateListItemContext(ctx, info.ID)
		return err
	}
	update := func() error {
		return b.api.UpdateListItemsContext(ctx, info.ID, []slack.ListItemCell{{RowID: row, ListItemField: slack.ListItemField{ColumnID: title,
			RichText: []slack.RichTextBlock{*slack.NewRichTextBlock("", slack.NewRichTextSection(slack.NewRichTextSectionTextElement("x", nil)))}}}})
	}
	del := func() error { return b.api.DeleteListItemContext(ctx, info.ID, row) }
	list := func() error { _, err := b.api.GetListItemsContext(ctx, info.ID); return err }
	get := func() error { _, err := b.api.GetListItemInfoContext(ctx, info.ID, row); return err }

	if err := b.srv.SetBotAccess(info.ID, ""); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{"create": create, "update": update, "delete": del, "list": list, "info": get} {
		if err := call(); slackCode(err) != fakeslack.CodePermissionDenied {
			t.Errorf("%s without access = %v, want permission_denied", name, err)
		}
	}
	if err := b.srv.SetBotAccess(info.ID, "read"); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{"list": list, "info": get} {
		if err := call(); err != nil {
			t.Errorf("%s with read access = %v", name, err)
		}
	}
	for name, call := range map[string]func() error{"create": create, "update": update, "delete": del} {
		if err := call(); slackCode(err) != fakeslack.CodePermissionDenied {
			t.Errorf("%s with read access = %v, want permission_denied", name, err)
		}
	}
	if rows := b.srv.Rows(info.ID); len(rows) != 1 || rows[0].Text(title) != "first" {
		t.Fatalf("refused writes changed the List: %+v", rows)
	}
}

// TestListAccessSet: the bot that created a List owns it and grants read, write and owner
// access (https://api.slack.com/methods/slackLists.access.set); the fake refuses what the page
// refuses and what it leaves unclear, and a bot that is no longer owner cannot grant.
func TestListAccessSet(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{Channels: []string{testChannel}})
	ctx := t.Context()
	created, err := b.api.CreateListContext(ctx, "Inquiries")
	if err != nil {
		t.Fatal(err)
	}
	id := created.ListID
	refused := []struct {
		name  string
		level slack.ListAccessLevel
		opts  []slack.SetListAccessOption
		want  string
	}{
		{"neither users nor channels", slack.ListAccessRead, nil, fakeslack.CodeInvalidParameters},
		{"both users and channels", slack.ListAccessRead, []slack.SetListAccessOption{slack.SetListAccessOptionUserIDs([]string{"U0VIEWER01"}), slack.SetListAccessOptionChannelIDs([]string{testChannel})}, fakeslack.CodeInvalidParameters},
		{"owner to a channel", slack.ListAccessOwner, []slack.SetListAccessOption{slack.SetListAccessOptionChannelIDs([]string{testChannel})}, fakeslack.CodeInvalidArguments},
		{"two owners", slack.ListAccessOwner, []slack.SetListAccessOption{slack.SetListAccessOptionUserIDs([]string{"U0OWNER0001", "U0OWNER0002"})}, fakeslack.CodeInvalidArgs},
		{"unknown level", "admin", []slack.SetListAccessOption{slack.SetListAccessOptionUserIDs([]string{"U0VIEWER01"})}, fakeslack.CodeInvalidArgs},
		{"malformed user", slack.ListAccessRead, []slack.SetListAccessOption{slack.SetListAccessOptionUserIDs([]string{"alice"})}, fakeslack.CodeUserNotFound},
		{"unknown channel", slack.ListAccessRead, []slack.SetListAccessOption{slack.SetListAccessOptionChannelIDs([]string{"C0NOSUCH001"})}, fakeslack.CodeChannelNotFound},
	}
	for _, tt := range refused {
		if err := b.api.SetListAccessContext(ctx, id, tt.level, tt.opts...); slackCode(err) != tt.want {
			t.Errorf("%s = %v, want %s", tt.name, err, tt.want)
		}
	}
	if err := b.api.SetListAccessContext(ctx, "F0NOSUCHLS1", slack.ListAccessRead, slack.SetListAccessOptionUserIDs([]string{"U0VIEWER01"})); slackCode(err) != fakeslack.CodeListNotFound {
		t.Errorf("unknown List = %v", err)
	}
	if err := b.api.SetListAccessContext(ctx, id, slack.ListAccessRead, slack.SetListAccessOptionUserIDs([]string{"U0VIEWER01", "U0VIEWER02"})); err != nil {
		t.Fatal(err)
	}
	if err := b.api.SetListAccessContext(ctx, id, slack.ListAccessRead, slack.SetListAccessOptionChannelIDs([]string{testChannel})); err != nil {
		t.Fatal(err)
	}
	if err := b.api.SetListAccessContext(ctx, id, slack.ListAccessOwner, slack.SetListAccessOptionUserIDs([]string{"U0OWNER0001"})); err != nil {
		t.Fatal(err)
	}
	got := b.srv.ListAccess(id)
	want := map[string]string{"U0VIEWER01": "read", "U0VIEWER02": "read", testChannel: "read", "U0OWNER0001": "owner", b.srv.BotUserID(): "write"}
	if len(got) != len(want) {
		t.Fatalf("access = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("access = %v, want %v", got, want)
		}
	}
	// The bot handed ownership over: it writes rows but grants nothing more.
	if err := b.api.SetListAccessContext(ctx, id, slack.ListAccessRead, slack.SetListAccessOptionUserIDs([]string{"U0VIEWER03"})); slackCode(err) != fakeslack.CodeRestrictedAction {
		t.Fatalf("grant by a former owner = %v, want restricted_action", err)
	}
	if _, err := b.api.CreateListItemContext(ctx, id); err != nil {
		t.Fatalf("row by the former owner (write access): %v", err)
	}
}

// TestHistoryNonMarketplaceLimits: with Options.NonMarketplace, conversations.history answers at
// most 15 messages per call whatever limit asks, and a second call within a minute is
// ratelimited with Retry-After; a minute later (on the fake's clock) it answers again.
func TestHistoryNonMarketplaceLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{NonMarketplace: true})
	for i := range 20 {
		if _, _, err := b.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("m"+strconv.Itoa(i), false)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.api.GetConversationHistoryContext(t.Context(), &slack.GetConversationHistoryParameters{ChannelID: testChannel, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != fakeslack.HistoryNonMarketplaceLimit || !res.HasMore {
		t.Fatalf("%d messages, has_more %v; want %d and more", len(res.Messages), res.HasMore, fakeslack.HistoryNonMarketplaceLimit)
	}
	b.clock.Advance(30 * time.Second)
	a := b.postForm(t, "conversations.history", map[string][]string{"token": {b.srv.Token()}, "channel": {testChannel}})
	if a.status != http.StatusTooManyRequests || a.errCode() != fakeslack.CodeRateLimited || a.header.Get("Retry-After") != "30" {
		t.Fatalf("second call within the minute: %d %s Retry-After %q", a.status, a.errCode(), a.header.Get("Retry-After"))
	}
	b.clock.Advance(30 * time.Second)
	if _, err := b.api.GetConversationHistoryContext(t.Context(), &slack.GetConversationHistoryParameters{ChannelID: testChannel, Cursor: res.ResponseMetaData.NextCursor}); err != nil {
		t.Fatalf("a minute later: %v", err)
	}
	// Without the option the same fake answers a full page and no limit.
	free := setup(t, fakeslack.Options{})
	for i := range 20 {
		if _, _, err := free.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("m"+strconv.Itoa(i), false)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		res, err := free.api.GetConversationHistoryContext(t.Context(), &slack.GetConversationHistoryParameters{ChannelID: testChannel, Limit: 100})
		if err != nil || len(res.Messages) != 20 {
			t.Fatalf("without the option: %d messages, %v", len(res.Messages), err)
		}
	}
}

// TestRepliesNonMarketplaceLimits: with Options.NonMarketplace, conversations.replies also answers
// at most 15 messages a call and one call a minute; oldest and latest bound the thread's messages,
// the parent included.
func TestRepliesNonMarketplaceLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{NonMarketplace: true})
	_, root, err := b.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("root", false))
	if err != nil {
		t.Fatal(err)
	}
	var ts []string
	for i := range 20 {
		b.clock.Advance(time.Second)
		_, r, err := b.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("r"+strconv.Itoa(i), false), slack.MsgOptionTS(root))
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, r)
	}
	msgs, more, _, err := b.api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: root, Limit: 100})
	if err != nil || len(msgs) != fakeslack.HistoryNonMarketplaceLimit || !more || msgs[0].Timestamp != root {
		t.Fatalf("first page: %d messages, more %v, %v", len(msgs), more, err)
	}
	if _, _, _, err := b.api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: root}); slackCode(err) != fakeslack.CodeRateLimited {
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("second call within the minute = %v, want ratelimited", err)
		}
	}
	b.clock.Advance(time.Minute)
	msgs, more, _, err = b.api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: testChannel, Timestamp: root,
		Oldest: ts[4], Latest: ts[9], Inclusive: true})
	if err != nil || len(msgs) != 6 || more || msgs[0].Timestamp != ts[4] || msgs[5].Timestamp != ts[9] {
		t.Fatalf("window ts[4]..ts[9]: %d messages, more %v, %v", len(msgs), more, err)
	}
}
