package slackinstall

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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

// Start records a single-use state for tenant and returns the authorize URL to send the admin to.
func (o *OAuth) Start(ctx context.Context, tenant domain.TenantID) (string, error) {
	if !o.Config.Enabled() {
		return "", fmt.Errorf("slack oauth: %w", domain.ErrNotFound)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	exp := o.Store.Now().Add(o.Config.StateTTL).Unix()
	if _, err := o.Store.DB.ExecContext(ctx, o.Store.DB.Rebind(`INSERT INTO slack_oauth_states (nonce, tenant_id, expires_at) VALUES (?, ?, ?)`),
		nonce, tenant, exp); err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(string(tenant) + "|" + nonce + "|" + strconv.FormatInt(exp, 10)))
	q := url.Values{
		"client_id":    {o.Config.ClientID},
		"scope":        {o.Config.Scopes},
		"redirect_uri": {o.Config.RedirectURL},
		"state":        {payload + "." + o.mac(payload)},
	}
	return o.Config.AuthorizeURL + "?" + q.Encode(), nil
}

// claim checks state's MAC and expiry and marks its nonce used; it returns the tenant it binds.
func (o *OAuth) claim(ctx context.Context, state string) (domain.TenantID, error) {
	payload, mac, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(o.mac(payload))) {
		return "", ErrOAuthState
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", ErrOAuthState
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return "", ErrOAuthState
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	now := o.Store.Now()
	if err != nil || now.Unix() > exp {
		return "", ErrOAuthState
	}
	res, err := o.Store.DB.ExecContext(ctx, o.Store.DB.Rebind(`UPDATE slack_oauth_states SET used_at = ?
		WHERE nonce = ? AND tenant_id = ? AND used_at IS NULL AND expires_at >= ?`), now.Unix(), parts[1], parts[0], now.Unix())
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", ErrOAuthState
	}
	return domain.TenantID(parts[0]), nil
}

// Callback completes an install: it claims the state, exchanges the code with oauth.v2.access and
// records the installation for the state's tenant (audited like casebook slack install).
func (o *OAuth) Callback(ctx context.Context, code, state string) (Installation, error) {
	if !o.Config.Enabled() {
		return Installation{}, fmt.Errorf("slack oauth: %w", domain.ErrNotFound)
	}
	tenant, err := o.claim(ctx, state)
	if err != nil {
		return Installation{}, err
	}
	if code == "" {
		return Installation{}, domain.Invalid("code", "is required")
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
