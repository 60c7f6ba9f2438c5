package fakeslack

import (
	"fmt"
	"net/http"
)

// oauthState is the fake's OAuth v2 app: the client credentials it accepts and the authorization
// codes it has issued. Our reading of Slack: a code is single-use and bound to the redirect URI of
// the authorize request; the answer carries the bot token, the app, the team and (for an org-wide
// install) the enterprise.
type oauthState struct {
	clientID, clientSecret string
	codes                  map[string]string // code → redirect URI
	issued                 int
}

// SetOAuthApp sets the client id and secret that oauth.v2.access accepts.
func (s *Server) SetOAuthApp(clientID, clientSecret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauth.clientID, s.oauth.clientSecret = clientID, clientSecret
}

// IssueOAuthCode mints a single-use authorization code for redirectURI, as Slack does when a user
// approves the install on the authorize page.
func (s *Server) IssueOAuthCode(redirectURI string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oauth.codes == nil {
		s.oauth.codes = map[string]string{}
	}
	s.oauth.issued++
	code := fmt.Sprintf("%s.code%04d", s.opts.TeamID, s.oauth.issued)
	s.oauth.codes[code] = redirectURI
	return code
}

// oauthV2AccessLocked answers oauth.v2.access: client credentials in the form, no bearer token.
func (s *Server) oauthV2AccessLocked(p params) answer {
	switch {
	case s.oauth.clientID == "" || p.str("client_id") != s.oauth.clientID:
		return errorAnswer(errCode("invalid_client_id"))
	case p.str("client_secret") != s.oauth.clientSecret:
		return errorAnswer(errCode("bad_client_secret"))
	}
	redirect, ok := s.oauth.codes[p.str("code")]
	if !ok {
		return errorAnswer(errCode("invalid_code"))
	}
	delete(s.oauth.codes, p.str("code"))
	if redirect != p.str("redirect_uri") {
		return errorAnswer(errCode("bad_redirect_uri"))
	}
	return answer{status: http.StatusOK, body: map[string]any{
		"ok": true, "access_token": s.opts.Token, "token_type": "bot", "scope": "chat:write,channels:history,lists:read,lists:write",
		"bot_user_id": s.opts.BotUserID, "app_id": s.opts.AppID,
		"team":                  map[string]any{"id": s.opts.TeamID, "name": s.opts.TeamName},
		"is_enterprise_install": false,
	}}
}
