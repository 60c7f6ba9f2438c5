package fakeslack

import (
	"net/url"
	"strings"
)

// chatGetPermalink is chat.getPermalink (https://api.slack.com/methods/chat.getPermalink): it
// needs no scope; channel and message_ts are required (invalid_arguments otherwise); an unknown
// channel is channel_not_found and an unknown message message_not_found. The permalink is
// https://{workspace}.slack.com/archives/{channel}/p{ts without its dot}, and for a reply adds
// thread_ts and cid, as Slack's do.
func (s *Server) chatGetPermalink(req *request) (any, *apiError) {
	ts := req.p.str("message_ts")
	if req.channel == "" || ts == "" {
		return nil, errCode(CodeInvalidArguments)
	}
	c, ok := s.channels[req.channel]
	if !ok {
		return nil, errCode(CodeChannelNotFound)
	}
	m, _ := c.find(ts)
	if m == nil {
		return nil, errCode(CodeMessageNotFound)
	}
	link := "https://" + s.workspaceDomain() + ".slack.com/archives/" + c.id + "/p" + strings.ReplaceAll(m.ts, ".", "")
	if m.isReply() {
		link += "?" + url.Values{"thread_ts": {m.threadTS}, "cid": {c.id}}.Encode()
	}
	return map[string]any{"ok": true, "channel": c.id, "permalink": link}, nil
}

// workspaceDomain is the fake workspace's subdomain, from its team name.
func (s *Server) workspaceDomain() string {
	var b strings.Builder
	for _, r := range strings.ToLower(s.opts.TeamName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
