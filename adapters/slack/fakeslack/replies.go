package fakeslack

import (
	"encoding/base64"
	"strings"
)

// CodeThreadNotFound is conversations.replies' answer for a ts that names no message.
const CodeThreadNotFound = "thread_not_found"

const repliesCursorPrefix = "after_ts:"

// conversationsReplies follows Slack's conversations.replies reference: the parent message first,
// then its replies oldest first, limit per page (default and ceiling as for history: our reading,
// Slack's docs name 1000 as the maximum; Options.NonMarketplace: 15), oldest/latest/inclusive as
// for history, a next_cursor while more remain, and metadata only with include_all_metadata. A ts that is a reply returns that reply's thread (Slack answers with the
// thread the message belongs to); an unknown ts is thread_not_found.
func (s *Server) conversationsReplies(req *request) (any, *apiError) {
	c, ok := s.channelLocked(req.channel)
	if !ok {
		return nil, errCode(CodeChannelNotFound)
	}
	ts := req.p.str("ts")
	if ts == "" {
		return nil, errCode(CodeInvalidArguments)
	}
	m, _ := c.find(ts)
	if m == nil {
		return nil, errCode(CodeThreadNotFound)
	}
	if m.isReply() {
		if m, _ = c.find(m.threadTS); m == nil {
			return nil, errCode(CodeThreadNotFound)
		}
	}
	w, e := s.readWindow(req)
	if e != nil {
		return nil, e
	}
	limit, inclusive, oldest, latest := w.limit, w.inclusive, w.oldest, w.latest
	// oldest and latest bound every message, the parent included (our reading: the reference
	// names no exception for it).
	var thread []*message
	for _, x := range append([]*message{m}, c.replies(m.ts)...) {
		t, _ := parseTS(x.ts)
		if (inclusive && (t < oldest || t > latest)) || (!inclusive && (t <= oldest || t >= latest)) {
			continue
		}
		thread = append(thread, x)
	}
	if cur := req.p.str("cursor"); cur != "" {
		raw, err := base64.StdEncoding.DecodeString(cur)
		after, found := strings.CutPrefix(string(raw), repliesCursorPrefix)
		at, valid := parseTS(after)
		if err != nil || !found || !valid {
			return nil, errCode(CodeInvalidCursor)
		}
		i := 0
		for i < len(thread) {
			if t, _ := parseTS(thread[i].ts); t > at {
				break
			}
			i++
		}
		thread = thread[i:]
	}
	hasMore := len(thread) > limit
	next := ""
	if hasMore {
		thread = thread[:limit]
		next = base64.StdEncoding.EncodeToString([]byte(repliesCursorPrefix + thread[limit-1].ts))
	}
	withMD := req.p.boolean("include_all_metadata")
	msgs := make([]wireMessage, 0, len(thread))
	for _, x := range thread {
		msgs = append(msgs, s.wireLocked(c, x, withMD))
	}
	return map[string]any{"ok": true, "messages": msgs, "has_more": hasMore, "response_metadata": map[string]any{"next_cursor": next}}, nil
}
