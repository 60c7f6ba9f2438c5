package slackinstall

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// DefaultAuthorizeURL is Slack's OAuth v2 authorize page.
const DefaultAuthorizeURL = "https://slack.com/oauth/v2/authorize"

// DefaultScopes are the bot scopes Casebook asks for: post and find its own messages, read and
// write Lists.
const DefaultScopes = "chat:write,channels:history,groups:history,lists:read,lists:write"

// ErrOAuthState is returned for a state that is forged, expired, already used or unknown. The four
// are not told apart to the caller.
var ErrOAuthState = errors.New("slack oauth: invalid state")

// OAuthConfig is a distributed Slack app's OAuth v2 settings.
type OAuthConfig struct {
	ClientID     string
	ClientSecret string
	// SigningSecret is the app's; it is stored with every installation the flow creates.
	SigningSecret string
	RedirectURL   string
	Scopes        string        // DefaultScopes when empty
	AuthorizeURL  string        // DefaultAuthorizeURL when empty
	APIURL        string        // DefaultAPIURL when empty
	StateTTL      time.Duration // 10 minutes when zero
}

// Enabled reports whether the flow is configured.
func (c OAuthConfig) Enabled() bool {
	return c.ClientID != "" && c.ClientSecret != "" && c.RedirectURL != ""
}

// OAuth runs the install flow. Start binds a state to the tenant whose admin started it; Callback
// accepts a state once, before it expires, and only with a valid MAC, so a code can only ever
// install into the tenant that asked for it.
type OAuth struct {
	Store  *Store
	Config OAuthConfig
	key    []byte
}

var oauthMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_oauth_states (
	nonce      TEXT   PRIMARY KEY,
	tenant_id  TEXT   NOT NULL,
	expires_at BIGINT NOT NULL,
	used_at    BIGINT
)`}, {Version: 2, SQL: `
ALTER TABLE slack_oauth_states ADD COLUMN browser_hash TEXT NOT NULL DEFAULT '';
CREATE TABLE IF NOT EXISTS slack_install_links (
	token_hash TEXT   PRIMARY KEY,
	tenant_id  TEXT   NOT NULL,
	created_by TEXT   NOT NULL,
	expires_at BIGINT NOT NULL,
	used_at    BIGINT
)`}}

// NewOAuth migrates the state table and keys state MACs from the instance secret.
func NewOAuth(ctx context.Context, st *Store, secret []byte, cfg OAuthConfig) (*OAuth, error) {
	if err := sqldb.Migrate(ctx, st.DB, "slack_oauth", oauthMigrations); err != nil {
		return nil, err
	}
	if cfg.Scopes == "" {
		cfg.Scopes = DefaultScopes
	}
	if cfg.AuthorizeURL == "" {
		cfg.AuthorizeURL = DefaultAuthorizeURL
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.StateTTL == 0 {
		cfg.StateTTL = 10 * time.Minute
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("casebook slack oauth state v1"))
	return &OAuth{Store: st, Config: cfg, key: m.Sum(nil)}, nil
}

func (o *OAuth) mac(payload string) string {
	m := hmac.New(sha256.New, o.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// BrowserCookie is the cookie that binds an install to the browser that started it: it holds a
// random nonce whose SHA-256 is inside the state (under its MAC), and the callback refuses a state
// that arrives without it, so a state that leaks (a forwarded link, a log) cannot be completed from
// another browser, nor can a victim's browser be made to complete an attacker's install.
const BrowserCookie = "casebook_slack_install"

// NewBrowserNonce returns a fresh value for BrowserCookie.
func NewBrowserNonce() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func browserHash(nonce string) string {
	h := sha256.Sum256([]byte("casebook slack install browser v1|" + nonce))
	return hex.EncodeToString(h[:])
}

// Start records a single-use state for tenant bound to the browser holding browserNonce (its
// BrowserCookie) and returns the authorize URL to send that browser to.
func (o *OAuth) Start(ctx context.Context, tenant domain.TenantID, browserNonce string) (string, error) {
	if !o.Config.Enabled() {
		return "", fmt.Errorf("slack oauth: %w", domain.ErrNotFound)
	}
	if len(browserNonce) < 32 {
		return "", domain.Invalid("browser", "an install must be bound to a browser nonce")
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	bh := browserHash(browserNonce)
	exp := o.Store.Now().Add(o.Config.StateTTL).Unix()
	if _, err := o.Store.DB.ExecContext(ctx, o.Store.DB.Rebind(`INSERT INTO slack_oauth_states (nonce, tenant_id, expires_at, browser_hash) VALUES (?, ?, ?, ?)`),
		nonce, tenant, exp, bh); err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(string(tenant) + "|" + nonce + "|" + strconv.FormatInt(exp, 10) + "|" + bh))
	q := url.Values{
		"client_id":    {o.Config.ClientID},
		"scope":        {o.Config.Scopes},
		"redirect_uri": {o.Config.RedirectURL},
		"state":        {payload + "." + o.mac(payload)},
	}
	return o.Config.AuthorizeURL + "?" + q.Encode(), nil
}

// InstallLink is a one-time, expiring URL that starts an install for one tenant in whichever
// browser opens it first.
type InstallLink struct {
	URL       string    `json:"install_url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// InstallLinkPath is where install links are served; the token follows it.
const InstallLinkPath = "/slack/install/"

// NewInstallLink records a single-use link for tenant under base (the public URL), valid for the
// state TTL. Only the token's hash is stored; the issue is audited (SlackInstallLinkIssued, as
// createdBy: cli:<user>, principal:<id>).
func (o *OAuth) NewInstallLink(ctx context.Context, tenant domain.TenantID, base, createdBy string) (InstallLink, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return InstallLink{}, domain.Invalid("public_url", "must be Casebook's absolute public URL (https://…)")
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := base64.RawURLEncoding.EncodeToString(b[:])
	exp := o.Store.Now().Add(o.Config.StateTTL)
	if _, err := o.Store.DB.ExecContext(ctx, o.Store.DB.Rebind(`INSERT INTO slack_install_links (token_hash, tenant_id, created_by, expires_at) VALUES (?, ?, ?, ?)`),
		tokenHash(token), tenant, createdBy, exp.Unix()); err != nil {
		return InstallLink{}, err
	}
	if _, err := AppendEvent(ctx, o.Store.Events, InstallationStream(tenant), eventstore.Any(), tenant, createdBy,
		"slack-install-link:"+tokenHash(token)[:32], o.Store.Now(), "SlackInstallLinkIssued", SlackInstallLinkIssued{ExpiresAt: exp.UTC()}); err != nil {
		return InstallLink{}, err
	}
	return InstallLink{URL: strings.TrimSuffix(base, "/") + InstallLinkPath + token, ExpiresAt: exp.UTC()}, nil
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte("casebook slack install link v1|" + token))
	return hex.EncodeToString(h[:])
}

// OpenInstallLink uses token up (once, before it expires) and starts the install for its tenant,
// bound to the browser holding browserNonce. A used, expired or unknown token is ErrOAuthState.
func (o *OAuth) OpenInstallLink(ctx context.Context, token, browserNonce string) (string, error) {
	if !o.Config.Enabled() {
		return "", fmt.Errorf("slack oauth: %w", domain.ErrNotFound)
	}
	th, now := tokenHash(token), o.Store.Now().Unix()
	var tenant string
	if err := o.Store.DB.QueryRowContext(ctx, o.Store.DB.Rebind(`SELECT tenant_id FROM slack_install_links WHERE token_hash = ?`), th).Scan(&tenant); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", ErrOAuthState
		}
		return "", err
	}
	res, err := o.Store.DB.ExecContext(ctx, o.Store.DB.Rebind(`UPDATE slack_install_links SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at >= ?`),
		now, th, now)
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", ErrOAuthState
	}
	return o.Start(ctx, domain.TenantID(tenant), browserNonce)
}

// claim checks state's MAC, expiry and browser (the hash of browserNonce must be the one bound in
// it, checked before the state is used up, so a wrong browser cannot burn it) and marks its nonce
// used; it returns the tenant it binds.
func (o *OAuth) claim(ctx context.Context, state, browserNonce string) (domain.TenantID, error) {
	payload, mac, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(o.mac(payload))) {
		return "", ErrOAuthState
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", ErrOAuthState
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 4 || browserNonce == "" || !hmac.Equal([]byte(parts[3]), []byte(browserHash(browserNonce))) {
		return "", ErrOAuthState
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	now := o.Store.Now()
	if err != nil || now.Unix() > exp {
		return "", ErrOAuthState
	}
	res, err := o.Store.DB.ExecContext(ctx, o.Store.DB.Rebind(`UPDATE slack_oauth_states SET used_at = ?
		WHERE nonce = ? AND tenant_id = ? AND browser_hash = ? AND used_at IS NULL AND expires_at >= ?`), now.Unix(), parts[1], parts[0], parts[3], now.Unix())
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", ErrOAuthState
	}
	return domain.TenantID(parts[0]), nil
}

// Callback completes an install in the browser that started it (browserNonce is its
// BrowserCookie): it claims the state, exchanges the code with oauth.v2.access and records the
// installation for the state's tenant (audited like casebook slack install).
func (o *OAuth) Callback(ctx context.Context, code, state, browserNonce string) (Installation, error) {
	if !o.Config.Enabled() {
		return Installation{}, fmt.Errorf("slack oauth: %w", domain.ErrNotFound)
	}
	if code == "" { // before the state is claimed: a redirect without a code must not use it up
		return Installation{}, domain.Invalid("code", "is required")
	}
	tenant, err := o.claim(ctx, state, browserNonce)
	if err != nil {
		return Installation{}, err
	}
	hc := o.Store.httpClient()
	resp, err := slack.GetOAuthV2ResponseContext(ctx, hc, o.Config.ClientID, o.Config.ClientSecret, code, o.Config.RedirectURL,
		slack.OAuthOptionAPIURL(o.Config.APIURL))
	if err != nil {
		return Installation{}, fmt.Errorf("slack oauth: exchange the code: %w", err)
	}
	return o.Store.Install(ctx, InstallRequest{Tenant: tenant, Token: resp.AccessToken, SigningSecret: o.Config.SigningSecret,
		AppID: resp.AppID, APIURL: o.Config.APIURL})
}
