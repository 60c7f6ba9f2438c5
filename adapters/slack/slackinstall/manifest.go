package slackinstall

import (
	"net/url"
	"strings"

	"github.com/casebook/casebook/domain"
)

// The request paths Casebook serves for Slack.
const (
	PathEvents        = "/slack/events"
	PathInteractions  = "/slack/interactions"
	PathOAuthCallback = "/slack/oauth/callback"
)

// BotScopes are the bot scopes Casebook needs, each for one reason:
//   - chat:write: post and update thread messages;
//   - channels:history, groups:history: find its own message after a post with an unknown result;
//   - channels:read, groups:read: check that a destination exists and the bot is a member;
//   - users:read: learn the app id at install (bots.info) and name linked users;
//   - commands: the "Create inquiry" message shortcut (Slack requires it for shortcuts).
var BotScopes = []string{"chat:write", "channels:history", "groups:history", "channels:read", "groups:read", "users:read", "commands"}

// ListScopes are added for Slack Lists (a paid plan's feature).
var ListScopes = []string{"lists:read", "lists:write"}

// Scopes returns the bot scopes, with the List scopes when lists is set.
func Scopes(lists bool) []string {
	out := append([]string(nil), BotScopes...)
	if lists {
		out = append(out, ListScopes...)
	}
	return out
}

// Manifest is a Slack app manifest (docs.slack.dev/reference/app-manifest), as JSON. It is a
// plain struct so that a feature adds its part (a shortcut, an event) in one place.
type Manifest struct {
	DisplayInformation ManifestDisplay  `json:"display_information"`
	Features           ManifestFeatures `json:"features"`
	OAuthConfig        ManifestOAuth    `json:"oauth_config"`
	Settings           ManifestSettings `json:"settings"`
}

// ManifestDisplay is the app's name and description as shown in Slack.
type ManifestDisplay struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// ManifestFeatures are the bot user and any shortcuts.
type ManifestFeatures struct {
	BotUser   ManifestBotUser    `json:"bot_user"`
	Shortcuts []ManifestShortcut `json:"shortcuts,omitempty"`
}

// ManifestBotUser is the bot's display name.
type ManifestBotUser struct {
	DisplayName  string `json:"display_name"`
	AlwaysOnline bool   `json:"always_online"`
}

// ManifestShortcut is a global or message shortcut.
type ManifestShortcut struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // "message" or "global"
	CallbackID  string `json:"callback_id"`
	Description string `json:"description"`
}

// ManifestOAuth holds the redirect URL and the bot scopes.
type ManifestOAuth struct {
	RedirectURLs []string       `json:"redirect_urls,omitempty"`
	Scopes       ManifestScopes `json:"scopes"`
}

// ManifestScopes are the bot token's scopes.
type ManifestScopes struct {
	Bot []string `json:"bot"`
}

// ManifestSettings are the request URLs and switches.
type ManifestSettings struct {
	EventSubscriptions   ManifestEvents        `json:"event_subscriptions"`
	Interactivity        ManifestInteractivity `json:"interactivity"`
	OrgDeployEnabled     bool                  `json:"org_deploy_enabled"`
	SocketModeEnabled    bool                  `json:"socket_mode_enabled"`
	TokenRotationEnabled bool                  `json:"token_rotation_enabled"`
}

// ManifestEvents is the Events API request URL and the bot events.
type ManifestEvents struct {
	RequestURL string   `json:"request_url"`
	BotEvents  []string `json:"bot_events"`
}

// ManifestInteractivity is the interactions request URL.
type ManifestInteractivity struct {
	IsEnabled  bool   `json:"is_enabled"`
	RequestURL string `json:"request_url"`
}

// ManifestOptions are what `casebook slack manifest` takes.
type ManifestOptions struct {
	PublicURL string // https://…, where Slack reaches Casebook
	Name      string // "Casebook" when empty
	Lists     bool   // add the List scopes
}

// NewManifest builds the app manifest for a Casebook reachable at PublicURL: the three request
// URLs, the bot scopes (List scopes only with Lists), the events that disable an installation
// (app_uninstalled, tokens_revoked) and interactivity. PublicURL must be an absolute https URL
// without a query (Slack calls only https request URLs).
func NewManifest(o ManifestOptions) (Manifest, error) {
	u, err := url.Parse(o.PublicURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return Manifest{}, domain.Invalid("public_url", "must be an absolute https:// URL without query or fragment")
	}
	base := strings.TrimRight(u.String(), "/")
	name := o.Name
	if name == "" {
		name = "Casebook"
	}
	return Manifest{
		DisplayInformation: ManifestDisplay{Name: name, Description: "Customer inquiries, one thread each, worked from Slack."},
		Features: ManifestFeatures{BotUser: ManifestBotUser{DisplayName: name, AlwaysOnline: true},
			Shortcuts: []ManifestShortcut{{Name: "Create inquiry", Type: "message", CallbackID: ShortcutCreateInquiry,
				Description: "Record this message as a customer inquiry"}}},
		OAuthConfig: ManifestOAuth{
			RedirectURLs: []string{base + PathOAuthCallback},
			Scopes:       ManifestScopes{Bot: Scopes(o.Lists)},
		},
		Settings: ManifestSettings{
			EventSubscriptions: ManifestEvents{RequestURL: base + PathEvents, BotEvents: []string{"app_uninstalled", "tokens_revoked"}},
			Interactivity:      ManifestInteractivity{IsEnabled: true, RequestURL: base + PathInteractions},
		},
	}, nil
}
