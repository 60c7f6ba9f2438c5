package threads_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

const redirect = "https://casebook.example/slack/oauth/callback"

func newOAuth(t *testing.T, b *bundle) *slackinstall.OAuth {
	t.Helper()
	secret, err := b.app.Tenancy.Secret(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b.fake.SetOAuthApp("cid", "csecret")
	o, err := slackinstall.NewOAuth(t.Context(), b.app.Slack, secret, slackinstall.OAuthConfig{ClientID: "cid", ClientSecret: "csecret",
		SigningSecret: "app-signing", RedirectURL: redirect, APIURL: b.fake.URL(), AuthorizeURL: "https://slack.invalid/oauth/v2/authorize"})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func stateOf(t *testing.T, authorize string) string {
	t.Helper()
	u, err := url.Parse(authorize)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("client_id") != "cid" || q.Get("redirect_uri") != redirect || !strings.Contains(q.Get("scope"), "chat:write") {
		t.Fatalf("authorize URL = %s", authorize)
	}
	return q.Get("state")
}

// TestOAuthInstallBindsStateToTenant: the flow installs into the tenant that started it; a state is
// single-use, expires, and cannot be forged or moved to another tenant.
func TestOAuthInstallBindsStateToTenant(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			oauthFlow(t, setup(t, be.Config(t), "")) // no installation yet
		})
	}
}

func oauthFlow(t *testing.T, b *bundle) {
	t.Helper()
	ctx := t.Context()
	b.app.Slack.Now = b.clock.Now
	o := newOAuth(t, b)
	other, _, _, err := b.app.Tenancy.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}

	// Forged: the other tenant's id in a state minted for acme.
	start, err := o.Start(ctx, b.tenant)
	if err != nil {
		t.Fatal(err)
	}
	state := stateOf(t, start)
	payload, mac, _ := strings.Cut(state, ".")
	swapped := swapTenant(t, payload, string(other.ID)) + "." + mac
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), swapped); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("state moved to another tenant: %v", err)
	}
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state+"x"); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("tampered MAC: %v", err)
	}

	in, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state)
	if err != nil {
		t.Fatal(err)
	}
	if in.Tenant != b.tenant || in.TeamID != "T0FAKETEAM1" || in.AppID != "A0FAKEAPP01" {
		t.Fatalf("installation = %+v", in)
	}
	if sec, err := b.app.Slack.SigningSecret(ctx, b.tenant, in.ID); err != nil || sec != "app-signing" {
		t.Fatalf("signing secret = %q, %v", sec, err)
	}
	// Replayed.
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("replayed state: %v", err)
	}
	// Expired.
	late, err := o.Start(ctx, b.tenant)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(11 * time.Minute)
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), stateOf(t, late)); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("expired state: %v", err)
	}
	// A code for another redirect URI, or a made-up code, does not install.
	fresh, err := o.Start(ctx, b.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Callback(ctx, "T0FAKETEAM1.code9999", stateOf(t, fresh)); err == nil {
		t.Fatal("a made-up code installed")
	}
	evs, err := b.app.Store.ReadStream(ctx, slackinstall.InstallationStream(b.tenant), 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Type != "SlackInstalled" {
		t.Fatalf("installation stream = %d events (%v), want one SlackInstalled", len(evs), err)
	}
	if evs, _ := b.app.Store.ReadStream(ctx, slackinstall.InstallationStream(other.ID), 0, 0); len(evs) != 0 {
		t.Fatalf("the other tenant got %d installation events", len(evs))
	}
}

// swapTenant rewrites the tenant in a state payload, keeping nonce and expiry.
func swapTenant(t *testing.T, payload, tenant string) string {
	t.Helper()
	raw, err := decodeB64(payload)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(raw, "|", 2)
	return encodeB64(tenant + "|" + parts[1])
}

func decodeB64(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return string(b), err
}

func encodeB64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestOAuthRoutes: only a tenant's admin can start an install; the callback installs into that
// tenant, and refuses a forged state with the same answer as any other failure.
func TestOAuthRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, backends[0].Config(t), "")
	newOAuth(t, b)
	o := b.app.SlackOAuth
	o.Config = slackinstall.OAuthConfig{ClientID: "cid", ClientSecret: "csecret", SigningSecret: "app-signing", RedirectURL: redirect,
		APIURL: b.fake.URL(), AuthorizeURL: "https://slack.invalid/oauth/v2/authorize", Scopes: slackinstall.DefaultScopes, StateTTL: time.Minute}
	_, _, adminToken, err := b.app.Tenancy.CreateTenant(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	_, opToken, err := b.app.Tenancy.CreatePrincipal(t.Context(), "other", "Olga", domain.RoleOperator, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.app.Handler())
	defer srv.Close()
	if status, _ := call(t, srv, "GET", "/slack/oauth/start", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("anonymous start = %d", status)
	}
	if status, _ := call(t, srv, "GET", "/slack/oauth/start", opToken, ""); status != http.StatusForbidden {
		t.Fatalf("operator start = %d", status)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/slack/oauth/start", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin start = %d", res.StatusCode)
	}
	state := stateOf(t, res.Header.Get("Location"))
	code := b.fake.IssueOAuthCode(redirect)
	if status, body := call(t, srv, "GET", "/slack/oauth/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(state+"x"), "", ""); status != http.StatusBadRequest {
		t.Fatalf("forged state = %d %v", status, body)
	}
	if status, body := call(t, srv, "GET", "/slack/oauth/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(state), "", ""); status != http.StatusOK {
		t.Fatalf("callback = %d %v", status, body)
	}
	other, err := b.app.Tenancy.TenantBySlug(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(other.ID), 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("the starting tenant has %d installation events (%v), want 1", len(evs), err)
	}
	if evs, _ := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(b.tenant), 0, 0); len(evs) != 0 {
		t.Fatalf("another tenant was installed: %d events", len(evs))
	}
	if status, _ := call(t, srv, "GET", "/slack/oauth/callback?error=access_denied&state="+url.QueryEscape(state), "", ""); status != http.StatusBadRequest {
		t.Fatalf("cancelled install = %d", status)
	}
}
