package fakeslack_test

import (
	"testing"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestNotInChannelUntilInvited: a channel the bot has not joined exists (conversations.info says
// is_member false) but refuses chat.postMessage and conversations.history with not_in_channel until
// the bot is invited; removed again, chat.update is refused too.
func TestNotInChannelUntilInvited(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	const ch = "C0NOTJOIN01"
	b.srv.AddChannelWithoutBot(ch)
	info, err := b.api.GetConversationInfoContext(t.Context(), &slack.GetConversationInfoInput{ChannelID: ch})
	if err != nil || info.IsMember {
		t.Fatalf("info = %+v, %v", info, err)
	}
	if _, _, err := b.api.PostMessageContext(t.Context(), ch, slack.MsgOptionText("hi", false)); slackCode(err) != fakeslack.CodeNotInChannel {
		t.Fatalf("post before invite = %v", err)
	}
	if _, err := b.api.GetConversationHistoryContext(t.Context(), &slack.GetConversationHistoryParameters{ChannelID: ch}); slackCode(err) != fakeslack.CodeNotInChannel {
		t.Fatalf("history before invite = %v", err)
	}
	if !b.srv.InviteBot(ch) {
		t.Fatal("invite: no such channel")
	}
	_, ts, err := b.api.PostMessageContext(t.Context(), ch, slack.MsgOptionText("hi", false))
	if err != nil {
		t.Fatalf("post after invite = %v", err)
	}
	if info, err := b.api.GetConversationInfoContext(t.Context(), &slack.GetConversationInfoInput{ChannelID: ch}); err != nil || !info.IsMember {
		t.Fatalf("info after invite = %+v, %v", info, err)
	}
	b.srv.RemoveBot(ch)
	if _, _, _, err := b.api.UpdateMessageContext(t.Context(), ch, ts, slack.MsgOptionText("edit", false)); slackCode(err) != fakeslack.CodeNotInChannel {
		t.Fatalf("update after removal = %v", err)
	}
	if _, err := b.api.GetConversationInfoContext(t.Context(), &slack.GetConversationInfoInput{ChannelID: "C0NOSUCH001"}); slackCode(err) != fakeslack.CodeChannelNotFound {
		t.Fatalf("info of an unknown channel = %v", err)
	}
}

// TestBotsInfoNamesTheApp: bots.info answers the bot's app id (what an install learns), needs
// users:read, and knows no other bot.
func TestBotsInfoNamesTheApp(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	auth, err := b.api.AuthTestContext(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bot, err := b.api.GetBotInfoContext(t.Context(), slack.GetBotInfoParameters{Bot: auth.BotID})
	if err != nil || bot.AppID != "A0FAKEAPP01" {
		t.Fatalf("bots.info = %+v, %v", bot, err)
	}
	if _, err := b.api.GetBotInfoContext(t.Context(), slack.GetBotInfoParameters{Bot: "B0SOMEONE01"}); slackCode(err) != fakeslack.CodeBotNotFound {
		t.Fatalf("other bot = %v", err)
	}
	narrow := setup(t, fakeslack.Options{Scopes: []string{fakeslack.ScopeChatWrite}})
	if _, err := narrow.api.GetBotInfoContext(t.Context(), slack.GetBotInfoParameters{Bot: auth.BotID}); slackCode(err) != fakeslack.CodeMissingScope {
		t.Fatalf("without users:read = %v", err)
	}
}
