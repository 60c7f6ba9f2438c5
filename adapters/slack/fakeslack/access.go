package fakeslack

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
)

// Access levels of a List (https://api.slack.com/methods/slackLists.access.set): read, write,
// and owner, which only a user can hold. The bot that creates a List through slackLists.create
// owns it; a List made by hand (CreateList) is owned by a person and shared with the bot for
// writing, as an operator would share it. SetBotAccess plays a List not (or no longer) shared.
const (
	accessRead  = "read"
	accessWrite = "write"
	accessOwner = "owner"
)

var accessRank = map[string]int{accessRead: 1, accessWrite: 2, accessOwner: 3}

// slackUserID is the shape of a Slack user id.
var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// accessSet serves slackLists.access.set. From the page: both or neither of user_ids and
// channel_ids is invalid_parameters; owner granted to a channel is invalid_arguments ("only
// users can be owners"). Our reading, stricter where the page is silent:
//   - only the List's owner may change access (guess; the page says only the owner can make
//     another user the owner), else restricted_action;
//   - owner takes exactly one user (guess); the previous owner keeps write access (guess);
//   - a user id not shaped like Slack's is user_not_found, a channel the fake does not know
//     channel_not_found;
//   - Slack cannot be asked who has access (no slackLists.access.list method), so Casebook
//     records what it set; ListAccess shows the fake's truth to tests.
func (s *Server) accessSet(req *request) (any, *apiError) {
	l, e := s.listLocked(req.listID, accessRead)
	if e != nil {
		return nil, e
	}
	level := req.p.str("access_level")
	if accessRank[level] == 0 {
		return nil, errCode(CodeInvalidArgs)
	}
	var users, chans []string
	if raw := req.p.raw("user_ids"); raw != nil && json.Unmarshal(raw, &users) != nil {
		return nil, errCode(CodeInvalidArgs)
	}
	if raw := req.p.raw("channel_ids"); raw != nil && json.Unmarshal(raw, &chans) != nil {
		return nil, errCode(CodeInvalidArgs)
	}
	if (len(users) == 0) == (len(chans) == 0) {
		return nil, errCode(CodeInvalidParameters)
	}
	if level == accessOwner && len(chans) > 0 {
		return nil, errCode(CodeInvalidArguments)
	}
	if level == accessOwner && len(users) != 1 {
		return nil, errCode(CodeInvalidArgs)
	}
	if l.access[s.opts.BotUserID] != accessOwner {
		return nil, errCode(CodeRestrictedAction)
	}
	for _, u := range users {
		if !slackUserID.MatchString(u) {
			return nil, errCode(CodeUserNotFound)
		}
	}
	for _, c := range chans {
		if _, ok := s.channels[c]; !ok {
			return nil, errCode(CodeChannelNotFound)
		}
	}
	if level == accessOwner {
		for id, lv := range l.access {
			if lv == accessOwner {
				l.access[id] = accessWrite
			}
		}
	}
	for _, id := range append(users, chans...) {
		l.access[id] = level
	}
	return map[string]any{"ok": true}, nil
}

// ListAccess returns who holds which access level on a List (users and channels), nil for an
// unknown List.
func (s *Server) ListAccess(listID string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lists[listID]
	if !ok {
		return nil
	}
	return maps.Clone(l.access)
}

// SetBotAccess sets the bot's own access to a List by hand, as a person sharing or unsharing
// it would: "" removes it (every slackLists.items call is then permission_denied), "read"
// allows only items.info and items.list.
func (s *Server) SetBotAccess(listID, level string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	if level == "" {
		delete(l.access, s.opts.BotUserID)
		return nil
	}
	if accessRank[level] == 0 {
		return fmt.Errorf("fakeslack: access level %q: want read, write or owner", level)
	}
	l.access[s.opts.BotUserID] = level
	return nil
}
