package slackeffects

import (
	"context"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// MetadataEventType marks Casebook's messages; the payload's "key" is an opaque reference to the
// effect key (Sealer.Ref), by which a message whose post had an unknown result is found again.
const MetadataEventType = "casebook_effect"

// DefaultLookupLimit is how many messages a lookup by effect key reads at most.
const DefaultLookupLimit = 200

// Marked returns the message option that marks a message with key's opaque reference.
func Marked(sealer *slackinstall.Sealer, key string) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: MetadataEventType, EventPayload: map[string]any{"key": sealer.Ref(key)}})
}

func carries(sealer *slackinstall.Sealer, m slack.Message, key string) bool {
	return m.Metadata.EventType == MetadataEventType && m.Metadata.EventPayload["key"] == sealer.Ref(key)
}

// FindMessage looks for a top-level message marked with key among the channel's newest limit
// messages (conversations.history); "" when there is none.
func FindMessage(ctx context.Context, api *slack.Client, sealer *slackinstall.Sealer, channel, key string, limit int) (string, error) {
	if limit <= 0 {
		limit = DefaultLookupLimit
	}
	cursor, seen := "", 0
	for seen < limit {
		res, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: channel, Cursor: cursor, Limit: min(100, limit-seen), IncludeAllMetadata: true,
		})
		if err != nil {
			return "", err
		}
		for _, m := range res.Messages {
			if carries(sealer, m, key) {
				return m.Timestamp, nil
			}
		}
		seen += len(res.Messages)
		cursor = res.ResponseMetaData.NextCursor
		if !res.HasMore || cursor == "" || len(res.Messages) == 0 {
			break
		}
	}
	return "", nil
}

// FindReply looks for a reply marked with key in the thread of root (conversations.replies, at
// most limit messages); "" when there is none. Replies are not in conversations.history, so this is
// the lookup before a reply with an unknown outcome is sent again.
func FindReply(ctx context.Context, api *slack.Client, sealer *slackinstall.Sealer, channel, root, key string, limit int) (string, error) {
	if limit <= 0 {
		limit = DefaultLookupLimit
	}
	cursor, seen := "", 0
	for seen < limit {
		msgs, more, next, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: channel, Timestamp: root, Cursor: cursor, Limit: min(100, limit-seen), IncludeAllMetadata: true,
		})
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			if m.Timestamp != root && carries(sealer, m, key) {
				return m.Timestamp, nil
			}
		}
		seen += len(msgs)
		cursor = next
		if !more || cursor == "" || len(msgs) == 0 {
			break
		}
	}
	return "", nil
}
