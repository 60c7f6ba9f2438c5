package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSlackManifest: `slack manifest` prints the app manifest for the public URL: the three request
// URLs, interactivity on, the uninstall events, and the List scopes only with --lists; a URL Slack
// cannot call is refused.
func TestSlackManifest(t *testing.T) {
	t.Parallel()
	var m struct {
		Features struct {
			Shortcuts []struct {
				Type       string `json:"type"`
				CallbackID string `json:"callback_id"`
			} `json:"shortcuts"`
		} `json:"features"`
		OAuth struct {
			RedirectURLs []string `json:"redirect_urls"`
			Scopes       struct {
				Bot []string `json:"bot"`
			} `json:"scopes"`
		} `json:"oauth_config"`
		Settings struct {
			Events struct {
				URL       string   `json:"request_url"`
				BotEvents []string `json:"bot_events"`
			} `json:"event_subscriptions"`
			Interactivity struct {
				Enabled bool   `json:"is_enabled"`
				URL     string `json:"request_url"`
			} `json:"interactivity"`
		} `json:"settings"`
	}
	for _, lists := range []bool{false, true} {
		args := []string{"slack", "manifest", "--public-url", "https://cb.example.com/"}
		if lists {
			args = append(args, "--lists")
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("manifest = exit %d: %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(stdout), &m); err != nil {
			t.Fatal(err)
		}
		if m.Settings.Events.URL != "https://cb.example.com/slack/events" || m.Settings.Interactivity.URL != "https://cb.example.com/slack/interactions" ||
			!m.Settings.Interactivity.Enabled || len(m.OAuth.RedirectURLs) != 1 || m.OAuth.RedirectURLs[0] != "https://cb.example.com/slack/oauth/callback" {
			t.Fatalf("urls = %+v %+v", m.Settings, m.OAuth)
		}
		if !slices.Equal(m.Settings.Events.BotEvents, []string{"app_uninstalled", "tokens_revoked"}) {
			t.Fatalf("bot events %v", m.Settings.Events.BotEvents)
		}
		if got := slices.Contains(m.OAuth.Scopes.Bot, "lists:write") && slices.Contains(m.OAuth.Scopes.Bot, "lists:read"); got != lists {
			t.Fatalf("--lists=%v: scopes %v", lists, m.OAuth.Scopes.Bot)
		}
		if !slices.Contains(m.OAuth.Scopes.Bot, "chat:write") || !slices.Contains(m.OAuth.Scopes.Bot, "commands") {
			t.Fatalf("scopes %v", m.OAuth.Scopes.Bot)
		}
		// The "Create inquiry" message shortcut, whose callback id the interactions handler serves.
		if len(m.Features.Shortcuts) != 1 || m.Features.Shortcuts[0].Type != "message" || m.Features.Shortcuts[0].CallbackID != "casebook_create_inquiry" {
			t.Fatalf("shortcuts %+v", m.Features.Shortcuts)
		}
	}
	for _, bad := range []string{"http://cb.example.com", "cb.example.com", "https://cb.example.com/?x=1"} {
		if code, _, stderr := runCLI(t, "slack", "manifest", "--public-url", bad); code != 2 || !strings.Contains(stderr, "https://") {
			t.Errorf("--public-url %s = exit %d %q", bad, code, stderr)
		}
	}
}
