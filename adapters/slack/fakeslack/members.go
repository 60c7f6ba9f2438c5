package fakeslack

// Channel membership, bots.info and conversations.info.
//
// Our reading of Slack: a bot posts, edits and reads history only in channels it is a member of;
// elsewhere chat.postMessage, chat.update and conversations.history answer not_in_channel
// (docs.slack.dev/reference/methods/chat.postMessage and conversations.history, "not_in_channel";
// the chat:write.public scope, which lifts this for posting to public channels, is not modelled).
// Channels named in Options.Channels, added with AddChannel or NewChannel, or auto-created start
// with the bot invited (as a demo workspace would be set up); AddChannelWithoutBot starts one the
// bot has not joined, InviteBot and RemoveBot change that by hand, as a person would.

// CodeNotInChannel and CodeBotNotFound are Slack's answers for a channel the bot is not in and a
// bot id bots.info does not know.
const (
	CodeNotInChannel = "not_in_channel"
	CodeBotNotFound  = "bot_not_found"
)

// Scopes of the methods in this file.
const (
	ScopeChannelsRead = "channels:read"
	ScopeUsersRead    = "users:read"
)

// AddChannelWithoutBot makes channel id exist without the bot as a member.
func (s *Server) AddChannelWithoutBot(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok {
		c = newChannel(id)
		s.channels[id] = c
	}
	c.botAbsent = true
}

// InviteBot adds the bot to channel id, as /invite @bot does; false if there is no such channel.
func (s *Server) InviteBot(id string) bool { return s.setMember(id, true) }

// RemoveBot removes the bot from channel id; false if there is no such channel.
func (s *Server) RemoveBot(id string) bool { return s.setMember(id, false) }

func (s *Server) setMember(id string, member bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if ok {
		c.botAbsent = !member
	}
	return ok
}

// memberChannelLocked is the channel of a chat or history call: channel_not_found when it does not
// exist, not_in_channel when the bot is not a member.
func (s *Server) memberChannelLocked(id string) (*channel, *apiError) {
	c, ok := s.channelLocked(id)
	if !ok {
		return nil, errCode(CodeChannelNotFound)
	}
	if c.botAbsent {
		return nil, errCode(CodeNotInChannel)
	}
	return c, nil
}

// conversationsInfo answers whether a channel exists and whether the bot is in it
// (docs.slack.dev/reference/methods/conversations.info; is_member is the caller's membership).
func (s *Server) conversationsInfo(req *request) (any, *apiError) {
	c, ok := s.channelLocked(req.channel)
	if !ok {
		return nil, errCode(CodeChannelNotFound)
	}
	return map[string]any{"ok": true, "channel": map[string]any{
		"id": c.id, "name": "channel-" + c.id, "is_channel": c.id[0] == 'C', "is_group": c.id[0] == 'G',
		"is_private": c.id[0] == 'G', "is_archived": false, "is_member": !c.botAbsent,
	}}, nil
}

// botsInfo answers the fake's own bot: its app id and bot user (docs.slack.dev/reference/methods/bots.info);
// any other id is bot_not_found.
func (s *Server) botsInfo(req *request) (any, *apiError) {
	if req.p.str("bot") != s.opts.BotID {
		return nil, errCode(CodeBotNotFound)
	}
	return map[string]any{"ok": true, "bot": map[string]any{
		"id": s.opts.BotID, "deleted": false, "name": "casebook", "updated": 1700000000,
		"app_id": s.opts.AppID, "user_id": s.opts.BotUserID, "icons": map[string]any{},
	}}, nil
}
