package main

import (
	"flag"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// slackOAuthFlags are serve's settings for a distributed Slack app's OAuth v2 install routes. The
// secrets are best given through the environment, not the command line.
func slackOAuthFlags(fs *flag.FlagSet) *slackinstall.OAuthConfig {
	c := &slackinstall.OAuthConfig{}
	fs.StringVar(&c.ClientID, "slack-client-id", envOr("CASEBOOK_SLACK_CLIENT_ID", ""), "Slack app client id; enables /slack/oauth/* (CASEBOOK_SLACK_CLIENT_ID)")
	fs.StringVar(&c.ClientSecret, "slack-client-secret", envOr("CASEBOOK_SLACK_CLIENT_SECRET", ""), "Slack app client secret (CASEBOOK_SLACK_CLIENT_SECRET)")
	fs.StringVar(&c.SigningSecret, "slack-signing-secret", envOr("CASEBOOK_SLACK_SIGNING_SECRET", ""), "the Slack app's signing secret: verifies every request from Slack, before any install too (CASEBOOK_SLACK_SIGNING_SECRET)")
	fs.StringVar(&c.RedirectURL, "slack-redirect-url", envOr("CASEBOOK_SLACK_REDIRECT_URL", ""), "public URL of /slack/oauth/callback (CASEBOOK_SLACK_REDIRECT_URL)")
	fs.StringVar(&c.Scopes, "slack-scopes", envOr("CASEBOOK_SLACK_SCOPES", slackinstall.DefaultScopes), "bot scopes to request (CASEBOOK_SLACK_SCOPES)")
	fs.StringVar(&c.AuthorizeURL, "slack-authorize-url", envOr("CASEBOOK_SLACK_AUTHORIZE_URL", slackinstall.DefaultAuthorizeURL), "Slack's authorize page (CASEBOOK_SLACK_AUTHORIZE_URL)")
	fs.StringVar(&c.APIURL, "slack-oauth-api-url", envOr("CASEBOOK_SLACK_API_URL", slackinstall.DefaultAPIURL), "Slack Web API base for oauth.v2.access and auth.test (CASEBOOK_SLACK_API_URL)")
	return c
}
