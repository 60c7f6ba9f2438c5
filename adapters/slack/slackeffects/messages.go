package slackeffects

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// MetadataEventType marks Casebook's messages; the payload's "key" is an opaque reference to the
// effect key (Sealer.Ref), by which a message whose post had an unknown result is found again.
const MetadataEventType = "casebook_effect"

// Marked returns the message option that marks a message with key's opaque reference.
func Marked(sealer *slackinstall.Sealer, key string) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: MetadataEventType, EventPayload: map[string]any{"key": sealer.Ref(key)}})
}

func carries(sealer *slackinstall.Sealer, m slack.Message, key string) bool {
	return m.Metadata.EventType == MetadataEventType && m.Metadata.EventPayload["key"] == sealer.Ref(key)
}

// FindPosted looks for a top-level message marked with key that an earlier attempt of key (claimed
// in the Ledger) may have posted, and returns its ts, or "" once the attempt's whole window has
// been read and holds none (the window is then Cleared, so the caller may post).
//
// It reads conversations.history between the window's ends (oldest/latest, widened by
// Timing.ClockSkew), newest first, never the channel's recent pages: the channel may be busy,
// and Slack gives apps outside its Marketplace 15 messages per call and one call a minute. Each
// page read narrows the stored window, so a lookup cut short (a 429, a crash) resumes below the
// part already read instead of starting again.
func (r *Runtime) FindPosted(ctx context.Context, api *slack.Client, sealer *slackinstall.Sealer, channel, key string) (string, error) {
	from, to, err := r.Ledger.Window(ctx, key)
	if err != nil || from.IsZero() {
		return "", err
	}
	skew := r.Timing.ClockSkew
	oldest, latest := from.Add(-skew), to.Add(skew)
	for latest.After(oldest) {
		res, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: channel, Oldest: slackTS(oldest), Latest: slackTS(latest), Inclusive: true, Limit: 100, IncludeAllMetadata: true,
		})
		if err != nil {
			return "", err
		}
		for _, m := range res.Messages {
			if carries(sealer, m, key) {
				return m.Timestamp, nil
			}
		}
		if !res.HasMore || len(res.Messages) == 0 {
			break
		}
		last, ok := parseSlackTS(res.Messages[len(res.Messages)-1].Timestamp)
		if !ok || !last.Before(latest) {
			return "", fmt.Errorf("conversations.history in %s did not page back from %s", channel, slackTS(latest)) // the claim stays
		}
		latest = last
		if err := r.Ledger.Narrow(ctx, key, latest.Add(-skew)); err != nil {
			return "", err
		}
	}
	return "", r.Ledger.Cleared(ctx, key)
}

// slackTS writes t as a Slack timestamp ("1700000000.000100").
func slackTS(t time.Time) string {
	us := t.UnixMicro()
	return fmt.Sprintf("%d.%06d", us/1_000_000, us%1_000_000)
}

// parseSlackTS reads a Slack timestamp.
func parseSlackTS(ts string) (time.Time, bool) {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var us int64
	if frac != "" {
		frac = (frac + "000000")[:6]
		if us, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, false
		}
	}
	return time.UnixMicro(s*1_000_000 + us).UTC(), true
}

// FindPostedReply is FindPosted for a reply in the thread of root (replies are not in
// conversations.history): it reads conversations.replies between the window's ends, oldest
// first, and each page read raises the stored window's start, so a lookup cut short resumes above
// the part already read. It returns the reply's ts, or "" once the whole window holds none (then
// Cleared).
func (r *Runtime) FindPostedReply(ctx context.Context, api *slack.Client, sealer *slackinstall.Sealer, channel, root, key string) (string, error) {
	from, to, err := r.Ledger.Window(ctx, key)
	if err != nil || from.IsZero() {
		return "", err
	}
	skew := r.Timing.ClockSkew
	oldest, latest := from.Add(-skew), to.Add(skew)
	for latest.After(oldest) {
		msgs, more, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: channel, Timestamp: root, Oldest: slackTS(oldest), Latest: slackTS(latest), Inclusive: true, Limit: 100, IncludeAllMetadata: true,
		})
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			if m.Timestamp != root && carries(sealer, m, key) {
				return m.Timestamp, nil
			}
		}
		if !more || len(msgs) == 0 {
			break
		}
		last, ok := parseSlackTS(msgs[len(msgs)-1].Timestamp)
		if !ok || !last.After(oldest) {
			return "", fmt.Errorf("conversations.replies of %s did not page on from %s", root, slackTS(oldest)) // the claim stays
		}
		oldest = last
		if err := r.Ledger.NarrowFrom(ctx, key, oldest.Add(skew)); err != nil {
			return "", err
		}
	}
	return "", r.Ledger.Cleared(ctx, key)
}
