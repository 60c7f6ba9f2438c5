package threads_test

import (
	"encoding/base64"
	"encoding/json"
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
	browser, elsewhere := slackinstall.NewBrowserNonce(), slackinstall.NewBrowserNonce()
	if _, err := o.Start(ctx, b.tenant, ""); err == nil {
		t.Fatal("a state was minted without a browser to bind it to")
	}
	start, err := o.Start(ctx, b.tenant, browser)
	if err != nil {
		t.Fatal(err)
	}
	state := stateOf(t, start)
	payload, mac, _ := strings.Cut(state, ".")
	swapped := swapTenant(t, payload, string(other.ID)) + "." + mac
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), swapped, browser); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("state moved to another tenant: %v", err)
	}
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state+"x", browser); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("tampered MAC: %v", err)
	}
	// Another browser (another cookie, or none) cannot complete it, and does not use it up.
	for _, nonce := range []string{elsewhere, ""} {
		if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state, nonce); !errors.Is(err, slackinstall.ErrOAuthState) {
			t.Fatalf("state completed from another browser (%q): %v", nonce, err)
		}
	}

	in, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state, browser)
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
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), state, browser); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("replayed state: %v", err)
	}
	// Expired.
	late, err := o.Start(ctx, b.tenant, browser)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(11 * time.Minute)
	if _, err := o.Callback(ctx, b.fake.IssueOAuthCode(redirect), stateOf(t, late), browser); !errors.Is(err, slackinstall.ErrOAuthState) {
		t.Fatalf("expired state: %v", err)
	}
	// A code for another redirect URI, or a made-up code, does not install.
	fresh, err := o.Start(ctx, b.tenant, browser)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Callback(ctx, "T0FAKETEAM1.code9999", stateOf(t, fresh), browser); err == nil {
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
	return encodeB64(tenant + "|" + parts[1]) // nonce, expiry and browser hash kept
}

func decodeB64(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return string(b), err
}

func encodeB64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestOAuthRoutes: only a tenant's admin can start an install (an install link); the browser that
// opens the link completes it into that tenant, and a forged state gets the same answer as any
// other failure.
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
	link := startLink(t, srv, adminToken)
	cookie, authorize := openLink(t, srv, link)
	state := stateOf(t, authorize)
	code := b.fake.IssueOAuthCode(redirect)
	if status, body := callback(t, srv, code, state+"x", cookie); status != http.StatusBadRequest {
		t.Fatalf("forged state = %d %v", status, body)
	}
	// A redirect without a code is refused without using the state up: the real one still installs.
	if status, body := callback(t, srv, "", state, cookie); status != http.StatusUnprocessableEntity {
		t.Fatalf("callback without a code = %d %v", status, body)
	}
	if status, body := callback(t, srv, code, state, cookie); status != http.StatusOK {
		t.Fatalf("callback = %d %v", status, body)
	}
	other, err := b.app.Tenancy.TenantBySlug(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(other.ID), 0, 0)
	if err != nil || len(evs) != 2 || evs[0].Type != "SlackInstallLinkIssued" || evs[1].Type != "SlackInstalled" {
		t.Fatalf("the starting tenant's installation stream = %d events (%v), want the link issued then the install", len(evs), err)
	}
	if evs, _ := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(b.tenant), 0, 0); len(evs) != 0 {
		t.Fatalf("another tenant was installed: %d events", len(evs))
	}
	if status, _ := call(t, srv, "GET", "/slack/oauth/callback?error=access_denied&state="+url.QueryEscape(state), "", ""); status != http.StatusBadRequest {
		t.Fatalf("cancelled install = %d", status)
	}
}

// startLink asks GET /slack/oauth/start for an install link as token's admin and returns its path.
// The request goes through a client that follows redirects, as API clients do: the answer must
// not be one, or the client would use the browser's one-time link up (the tests then open it).
func startLink(t *testing.T, srv *httptest.Server, token string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/slack/oauth/start", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		InstallURL string `json:"install_url"`
		ExpiresAt  string `json:"expires_at"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Location") != "" || body.ExpiresAt == "" {
		t.Fatalf("admin start = %d %+v (Location %q), %v; want 200 with the link and no redirect", res.StatusCode, body, res.Header.Get("Location"), err)
	}
	return linkPath(t, body.InstallURL)
}

// linkPath checks an install link is under the public URL and returns its path.
func linkPath(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Scheme != "https" || u.Host != "casebook.example" || !strings.HasPrefix(u.Path, slackinstall.InstallLinkPath) {
		t.Fatalf("install link = %q", link)
	}
	return u.Path
}

// openLink opens an install link as a browser would: it returns the binding cookie the browser
// got (checking its attributes) and where it was sent.
func openLink(t *testing.T, srv *httptest.Server, path string) (*http.Cookie, string) {
	t.Helper()
	res := getNoRedirect(t, srv, path, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("open link %s = %d", path, res.StatusCode)
	}
	var c *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == slackinstall.BrowserCookie {
			c = ck
		}
	}
	if c == nil || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteLaxMode || c.Path != "/slack/oauth/callback" || len(c.Value) < 32 {
		t.Fatalf("binding cookie = %+v", c)
	}
	return c, res.Header.Get("Location")
}

func getNoRedirect(t *testing.T, srv *httptest.Server, path string, cookie *http.Cookie) *http.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	if cookie != nil {
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res
}

// callback is Slack's redirect of a browser holding cookie (nil: none) back to Casebook.
func callback(t *testing.T, srv *httptest.Server, code, state string, cookie *http.Cookie) (int, *http.Response) {
	t.Helper()
	res := getNoRedirect(t, srv, "/slack/oauth/callback?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(state), cookie)
	return res.StatusCode, res
}

// TestOAuthInstallLink: `casebook slack install-link` and GET /slack/oauth/start mint one-time,
// expiring links; a link opens once (a second open is refused), not after it expires, and binds
// the install to the browser that opened it: Slack's redirect arriving in another browser (no
// cookie, or another link's cookie) is refused and does not use the state up, and a link installs
// only into the tenant it was made for, even with another tenant's browser cookie.
func TestOAuthInstallLink(t *testing.T) {
	t.Parallel()
	b := setup(t, backends[0].Config(t), "")
	b.app.Slack.Now = b.clock.Now
	newOAuth(t, b)
	o := b.app.SlackOAuth
	o.Config = slackinstall.OAuthConfig{ClientID: "cid", ClientSecret: "csecret", SigningSecret: "app-signing", RedirectURL: redirect,
		APIURL: b.fake.URL(), AuthorizeURL: "https://slack.invalid/oauth/v2/authorize", Scopes: slackinstall.DefaultScopes, StateTTL: 10 * time.Minute}
	other, _, otherAdmin, err := b.app.Tenancy.CreateTenant(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.app.Handler())
	defer srv.Close()
	if _, err := o.NewInstallLink(t.Context(), b.tenant, "not a url", "cli:test"); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("link under a bad public URL: %v", err)
	}
	mint := func() string {
		l, err := o.NewInstallLink(t.Context(), b.tenant, "https://casebook.example/", "cli:test")
		if err != nil {
			t.Fatal(err)
		}
		if !l.ExpiresAt.Equal(b.clock.Now().Add(10 * time.Minute)) {
			t.Fatalf("link expires at %v", l.ExpiresAt)
		}
		return linkPath(t, l.URL)
	}

	// Used twice.
	link := mint()
	cookie, authorize := openLink(t, srv, link)
	if res := getNoRedirect(t, srv, link, nil); res.StatusCode != http.StatusBadRequest || len(res.Cookies()) != 0 {
		t.Fatalf("second open = %d, cookies %v", res.StatusCode, res.Cookies())
	}
	// Another browser: without the cookie, or with another link's cookie (another tenant's too).
	otherLink := startLink(t, srv, otherAdmin)
	otherCookie, otherAuthorize := openLink(t, srv, otherLink)
	state := stateOf(t, authorize)
	for name, c := range map[string]*http.Cookie{"no cookie": nil, "another tenant's browser": otherCookie} {
		if status, _ := callback(t, srv, b.fake.IssueOAuthCode(redirect), state, c); status != http.StatusBadRequest {
			t.Fatalf("%s = %d", name, status)
		}
	}
	// The browser that opened the link completes it (the refusals did not use the state up), and
	// its cookie is cleared.
	status, res := callback(t, srv, b.fake.IssueOAuthCode(redirect), state, cookie)
	if status != http.StatusOK {
		t.Fatalf("callback in the right browser = %d", status)
	}
	if cs := res.Cookies(); len(cs) != 1 || cs[0].Name != slackinstall.BrowserCookie || cs[0].MaxAge >= 0 {
		t.Fatalf("cookie after install = %v", cs)
	}
	if n := installs(t, b, b.tenant); n != 1 {
		t.Fatalf("the link's tenant has %d installs, want 1", n)
	}
	// The other tenant's state with this tenant's browser cookie is refused as a bad link; with its
	// own cookie it passes and is bound to the other tenant, so it cannot take this tenant's
	// workspace (409: the workspace is installed for another tenant).
	otherState := stateOf(t, otherAuthorize)
	if status, _ := callback(t, srv, b.fake.IssueOAuthCode(redirect), otherState, cookie); status != http.StatusBadRequest {
		t.Fatalf("another tenant's state in this browser = %d", status)
	}
	if status, _ := callback(t, srv, b.fake.IssueOAuthCode(redirect), otherState, otherCookie); status != http.StatusConflict {
		t.Fatalf("other tenant's own install of this workspace = %d, want 409", status)
	}
	if n := installs(t, b, other.ID); n != 0 {
		t.Fatalf("the other tenant has %d installs, want 0", n)
	}
	if n := installs(t, b, b.tenant); n != 1 {
		t.Fatalf("this tenant has %d installs, want still 1", n)
	}
	// Every link issued is audited with who asked; the link itself is in no event.
	evs, err := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(b.tenant), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	issued := 0
	for _, e := range evs {
		if e.Type == "SlackInstallLinkIssued" {
			issued++
			if !strings.Contains(string(e.Metadata), `"cli:test"`) || strings.Contains(string(e.Data), "/slack/install/") {
				t.Fatalf("link audit = %s, %s", e.Metadata, e.Data)
			}
		}
	}
	if issued != 1 {
		t.Fatalf("%d links audited for this tenant so far, want 1", issued)
	}
	// Expired: a link not opened within its lifetime.
	late := mint()
	b.clock.Advance(10*time.Minute + time.Second)
	if res := getNoRedirect(t, srv, late, nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("expired link = %d", res.StatusCode)
	}
	// An unknown token.
	if res := getNoRedirect(t, srv, slackinstall.InstallLinkPath+"bm90LWEtdG9rZW4", nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown link = %d", res.StatusCode)
	}
}

// installs counts a tenant's SlackInstalled events.
func installs(t *testing.T, b *bundle, tenant domain.TenantID) int {
	t.Helper()
	evs, err := b.app.Store.ReadStream(t.Context(), slackinstall.InstallationStream(tenant), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "SlackInstalled" {
			n++
		}
	}
	return n
}
