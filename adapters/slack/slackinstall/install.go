package slackinstall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// DefaultAPIURL is Slack's Web API base URL.
const DefaultAPIURL = "https://slack.com/api/"

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_installations (
	id                 TEXT   PRIMARY KEY,
	tenant_id          TEXT   NOT NULL,
	install_key        TEXT   NOT NULL,
	enterprise_id      TEXT   NOT NULL DEFAULT '',
	team_id            TEXT   NOT NULL,
	app_id             TEXT   NOT NULL DEFAULT '',
	bot_user_id        TEXT   NOT NULL DEFAULT '',
	api_url            TEXT   NOT NULL,
	token_sealed       TEXT   NOT NULL,
	signing_sealed     TEXT   NOT NULL,
	active             INTEGER NOT NULL,
	installed_at       BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS slack_installations_key ON slack_installations (install_key, active);
CREATE TABLE IF NOT EXISTS slack_destinations (
	id              TEXT   PRIMARY KEY,
	tenant_id       TEXT   NOT NULL,
	team            TEXT   NOT NULL DEFAULT '',
	installation_id TEXT   NOT NULL,
	channel_id      TEXT   NOT NULL,
	clearance       TEXT   NOT NULL,
	active          INTEGER NOT NULL,
	created_at      BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS slack_destinations_tenant ON slack_destinations (tenant_id, team, active)`}}

// Installation is a bot installation in one workspace, bound to one tenant.
type Installation struct {
	ID           string          `json:"installation_id"`
	Tenant       domain.TenantID `json:"tenant_id"`
	Key          string          `json:"key"`
	EnterpriseID string          `json:"enterprise_id,omitempty"`
	TeamID       string          `json:"team_id"`
	AppID        string          `json:"app_id,omitempty"`
	BotUserID    string          `json:"bot_user_id,omitempty"`
	APIURL       string          `json:"api_url"`
	token        string
}

// Token returns the decrypted bot token.
func (i Installation) Token() string { return i.token }

// InstallKey is the installation's identity: enterprise id when present, team id, app id.
func InstallKey(enterpriseID, teamID, appID string) string {
	return enterpriseID + "/" + teamID + "/" + appID
}

// Destination is where a tenant's (or a team's) inquiries are projected.
type Destination struct {
	ID           string                `json:"destination_id"`
	Tenant       domain.TenantID       `json:"tenant_id"`
	Team         string                `json:"team,omitempty"`
	Installation Installation          `json:"installation"`
	Channel      string                `json:"channel"`
	Clearance    domain.Classification `json:"-"`
	ClearanceStr string                `json:"clearance"`
	// Checked is what Slack said of the channel when it was set ("bot is a member", or
	// "not checked: …"); empty when read back.
	Checked string `json:"checked,omitempty"`
}

// Store is the installation registry: installations, destinations, user links and the OAuth
// states. It is the only reader and writer of their tables, and the only maker of Slack clients.
type Store struct {
	DB     *sqldb.DB
	Events eventstore.Store
	Sealer *Sealer
	Now    func() time.Time
	// HTTPClient is used for Slack calls; nil uses one with a 10 s timeout.
	HTTPClient *http.Client
	// AppSigningSecret is the app's signing secret (CASEBOOK_SLACK_SIGNING_SECRET): configuration,
	// not an installation's. With it, Slack's URL check succeeds before any install, and an
	// installation recorded without a secret of its own is verified with it.
	AppSigningSecret string
}

// NewStore migrates the tables and returns a store.
func NewStore(ctx context.Context, db *sqldb.DB, events eventstore.Store, secret []byte, now func() time.Time) (*Store, error) {
	if err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	s, err := NewSealer(secret)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Store{DB: db, Events: events, Sealer: s, Now: now}, nil
}

// Migrate creates the package's relational tables (their migrations keep the names they had
// when the package was called slackproj, so existing databases are not migrated twice).
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := sqldb.Migrate(ctx, db, "slackproj", migrations); err != nil {
		return err
	}
	if err := sqldb.Migrate(ctx, db, "slackproj-links", linkMigrations); err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, "slack-escalation", escalationMigrations)
}

func (s *Store) httpClient() *http.Client {
	if s.HTTPClient != nil {
		return s.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// Client returns a slack-go client for an installation. It is the one constructor of Slack
// clients: slack-go's retry option is never enabled, so a create is never resent blindly.
func (s *Store) Client(in Installation) *slack.Client {
	return newClient(in.token, in.APIURL, s.httpClient())
}

func newClient(token, apiURL string, hc *http.Client) *slack.Client {
	return slack.New(token, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(hc))
}

// ClientFor returns the client of a tenant's active installation by id; an inactive or unknown
// one, or another tenant's, is domain.ErrNotFound.
func (s *Store) ClientFor(ctx context.Context, tenant domain.TenantID, installationID string) (*slack.Client, Installation, error) {
	in, err := s.Installation(ctx, tenant, installationID)
	if err != nil {
		return nil, Installation{}, err
	}
	return s.Client(in), in, nil
}

// NewestInstallation returns the id of the tenant's newest active installation; none is a
// validation error that says what to run.
func (s *Store) NewestInstallation(ctx context.Context, tenant domain.TenantID) (string, error) {
	var id string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT id FROM slack_installations WHERE tenant_id = ? AND active = 1
		ORDER BY installed_at DESC LIMIT 1`), tenant).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", domain.Invalid("tenant", "has no Slack installation: run casebook slack install first")
	}
	return id, err
}

// InstallRequest is what `casebook slack install` supplies.
type InstallRequest struct {
	Tenant domain.TenantID
	Token  string
	// SigningSecret is stored with the installation only when given; "" relies on the app's
	// (Store.AppSigningSecret), which must then be configured.
	SigningSecret string
	// AppID, when given, must be the app the token belongs to; "" learns it.
	AppID  string
	APIURL string
}

// Install verifies the token with auth.test, learns the token's app id (auth.test → bot id →
// bots.info) and records the installation; a reinstall of the same key supersedes the old row
// (destinations move to the new one) with an audit event. An installation requests could not be
// matched to is refused: no signing secret (neither given nor the app's), or no app id (not
// learnable and not given, or given and not the token's). A key held by another tenant is
// domain.ErrConflict.
func (s *Store) Install(ctx context.Context, r InstallRequest) (Installation, error) {
	if !strings.HasPrefix(r.Token, "xoxb-") {
		return Installation{}, domain.Invalid("token", "must be a bot token (xoxb-…)")
	}
	if r.SigningSecret == "" && s.AppSigningSecret == "" {
		return Installation{}, domain.Invalid("signing_secret", "is required: set CASEBOOK_SLACK_SIGNING_SECRET (the app's Basic Information → Signing Secret)")
	}
	if r.APIURL == "" {
		r.APIURL = DefaultAPIURL
	}
	api := newClient(r.Token, r.APIURL, s.httpClient())
	auth, err := api.AuthTestContext(ctx)
	if err != nil {
		return Installation{}, fmt.Errorf("auth.test: %w", err)
	}
	appID, err := learnAppID(ctx, api, auth.BotID, r.AppID)
	if err != nil {
		return Installation{}, err
	}
	in := Installation{
		ID: tenancy.NewID(), Tenant: r.Tenant, EnterpriseID: auth.EnterpriseID, TeamID: auth.TeamID,
		AppID: appID, BotUserID: auth.UserID, APIURL: r.APIURL, token: r.Token,
	}
	in.Key = InstallKey(in.EnterpriseID, in.TeamID, in.AppID)
	var replaces string
	err = sqldb.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		var owner string
		err := tx.QueryRowContext(ctx, s.DB.Rebind(`SELECT id, tenant_id FROM slack_installations WHERE install_key = ? AND active = 1`), in.Key).
			Scan(&replaces, &owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			replaces = ""
		case err != nil:
			return err
		case owner != string(r.Tenant):
			return fmt.Errorf("installation %s belongs to another tenant: %w", in.Key, domain.ErrConflict)
		}
		if replaces != "" {
			if _, err := tx.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_installations SET active = 0 WHERE id = ?`), replaces); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_destinations SET installation_id = ? WHERE installation_id = ?`), in.ID, replaces); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_installations (id, tenant_id, install_key, enterprise_id, team_id, app_id,
			bot_user_id, api_url, token_sealed, signing_sealed, active, installed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)`),
			in.ID, in.Tenant, in.Key, in.EnterpriseID, in.TeamID, in.AppID, in.BotUserID, in.APIURL,
			s.Sealer.Seal(r.Token, in.ID+"/token"), s.Sealer.Seal(r.SigningSecret, in.ID+"/signing_secret"), s.Now().UnixNano())
		return err
	})
	if err != nil {
		return Installation{}, err
	}
	_, err = AppendEvent(ctx, s.Events, InstallationStream(r.Tenant), eventstore.Any(), r.Tenant, Actor, "slack-install:"+in.ID, s.Now(),
		"SlackInstalled", SlackInstalled{InstallationID: in.ID, Key: in.Key, EnterpriseID: in.EnterpriseID, TeamID: in.TeamID, AppID: in.AppID, Replaces: replaces})
	return in, err
}

// learnAppID asks Slack which app the bot belongs to (bots.info, scope users:read). Every request
// Slack sends names its app, so an installation without the right app id would match none of them
// (every click silently ignored): a learned id that differs from the given one, or none at all,
// refuses the install.
func learnAppID(ctx context.Context, api *slack.Client, botID, given string) (string, error) {
	var learned string
	var why error
	if botID == "" {
		why = errors.New("auth.test names no bot")
	} else if bot, err := api.GetBotInfoContext(ctx, slack.GetBotInfoParameters{Bot: botID}); err != nil {
		why = fmt.Errorf("bots.info: %w", err)
	} else {
		learned = bot.AppID
	}
	switch {
	case learned != "" && given != "" && learned != given:
		return "", domain.Invalid("app_id", "is %s, but the token belongs to app %s", given, learned)
	case learned != "":
		return learned, nil
	case given != "":
		return given, nil
	}
	return "", domain.Invalid("app_id", "could not be learned (%v): grant users:read or pass --app-id (the app's Basic Information → App ID)", why)
}

// Installation returns a tenant's active installation by id; domain.ErrNotFound otherwise.
func (s *Store) Installation(ctx context.Context, tenant domain.TenantID, id string) (Installation, error) {
	var in Installation
	var tok string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT id, tenant_id, install_key, enterprise_id, team_id, app_id, bot_user_id, api_url, token_sealed
		FROM slack_installations WHERE tenant_id = ? AND id = ? AND active = 1`), tenant, id).
		Scan(&in.ID, &in.Tenant, &in.Key, &in.EnterpriseID, &in.TeamID, &in.AppID, &in.BotUserID, &in.APIURL, &tok)
	if errors.Is(err, sql.ErrNoRows) {
		return Installation{}, fmt.Errorf("installation: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Installation{}, err
	}
	if in.token, err = s.Sealer.Open(tok, in.ID+"/token"); err != nil {
		return Installation{}, err
	}
	return in, nil
}

// SigningSecret returns an installation's decrypted signing secret.
func (s *Store) SigningSecret(ctx context.Context, tenant domain.TenantID, id string) (string, error) {
	var sealed string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT signing_sealed FROM slack_installations WHERE tenant_id = ? AND id = ?`), tenant, id).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("installation: %w", domain.ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	return s.Sealer.Open(sealed, id+"/signing_secret")
}

// ParseClearance reads public, internal or personal.
func ParseClearance(v string) (domain.Classification, error) {
	switch v {
	case "public":
		return domain.Public, nil
	case "internal":
		return domain.Internal, nil
	case "personal":
		return domain.Personal, nil
	}
	return 0, domain.Invalid("clearance", "must be public, internal or personal")
}

// DestinationRequest is what `casebook slack destination` supplies.
type DestinationRequest struct {
	Tenant    domain.TenantID
	Team      string // "" is the tenant's default
	Channel   string
	Clearance string
	// Installation picks one when the tenant has several; "" takes the newest active one.
	Installation string
}

// SetDestination makes a channel the destination of a tenant (or one of its teams). The previous
// destination is kept, inactive; threads already posted move to the new channel as new mappings.
func (s *Store) SetDestination(ctx context.Context, r DestinationRequest) (Destination, error) {
	in, cl, err := s.destinationTarget(ctx, r.Tenant, r.Clearance, r.Channel, r.Installation)
	if err != nil {
		return Destination{}, err
	}
	checked, err := s.checkChannel(ctx, in, r.Channel)
	if err != nil {
		return Destination{}, err
	}
	d := Destination{ID: tenancy.NewID(), Tenant: r.Tenant, Team: r.Team, Installation: in, Channel: r.Channel, Clearance: cl, ClearanceStr: r.Clearance, Checked: checked}
	var replaces string
	err = sqldb.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.DB.Rebind(`SELECT id FROM slack_destinations WHERE tenant_id = ? AND team = ? AND active = 1`), r.Tenant, r.Team).Scan(&replaces)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_destinations SET active = 0 WHERE tenant_id = ? AND team = ?`), r.Tenant, r.Team); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_destinations (id, tenant_id, team, installation_id, channel_id, clearance, active, created_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?)`), d.ID, d.Tenant, d.Team, in.ID, d.Channel, r.Clearance, s.Now().UnixNano())
		return err
	})
	if err != nil {
		return Destination{}, err
	}
	_, err = AppendEvent(ctx, s.Events, InstallationStream(r.Tenant), eventstore.Any(), r.Tenant, Actor, "slack-destination:"+d.ID, s.Now(),
		"SlackDestinationSet", SlackDestinationSet{DestinationID: d.ID, Team: d.Team, InstallationID: in.ID, Channel: d.Channel, Clearance: r.Clearance, Replaces: replaces})
	return d, err
}

// checkChannel asks Slack (conversations.info) whether the channel exists and the bot is a member:
// a channel Slack does not know, or one the bot has not joined, is refused with what to do. When
// Slack cannot answer (an installation without channels:read, an outage) the destination is set
// and the answer says it was not checked.
func (s *Store) checkChannel(ctx context.Context, in Installation, channel string) (string, error) {
	info, err := s.Client(in).GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
	var se slack.SlackErrorResponse
	switch {
	case errors.As(err, &se) && se.Err == "channel_not_found":
		return "", domain.Invalid("channel", "Slack knows no channel %s in this workspace (a private channel is visible only after the bot is invited: /invite @the-bot in it)", channel)
	case err != nil:
		return "not checked: " + callCode(err), nil
	case info.IsArchived:
		return "", domain.Invalid("channel", "%s is archived", channel)
	case !info.IsMember:
		return "", domain.Invalid("channel", "the bot is not a member of %s: in Slack, open the channel and type /invite @ followed by the bot's name, then run this again", channel)
	}
	return "bot is a member", nil
}

func callCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return "Slack did not answer"
}

// HasDestination reports whether a tenant has any active destination (no destination: zero I/O).
func (s *Store) HasDestination(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, tenant domain.TenantID) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, s.DB.Rebind(`SELECT count(*) FROM slack_destinations WHERE tenant_id = ? AND active = 1`), tenant).Scan(&n)
	return n > 0, err
}

// DestinationFor returns the destination of an inquiry's team, else the tenant's default.
// domain.ErrNotFound means Slack is disabled for it.
func (s *Store) DestinationFor(ctx context.Context, tenant domain.TenantID, team string) (Destination, error) {
	var d Destination
	var instID string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT id, team, installation_id, channel_id, clearance FROM slack_destinations
		WHERE tenant_id = ? AND active = 1 AND (team = ? OR team = '') ORDER BY CASE WHEN team = '' THEN 1 ELSE 0 END LIMIT 1`), tenant, team).
		Scan(&d.ID, &d.Team, &instID, &d.Channel, &d.ClearanceStr)
	if errors.Is(err, sql.ErrNoRows) {
		return Destination{}, fmt.Errorf("slack destination: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Destination{}, err
	}
	return s.completeDestination(ctx, d, tenant, instID)
}

// completeDestination fills in what a destination row read for tenant implies: its tenant, its
// parsed clearance and the installation (instID) that posts there.
func (s *Store) completeDestination(ctx context.Context, d Destination, tenant domain.TenantID, instID string) (Destination, error) {
	d.Tenant = tenant
	var err error
	if d.Clearance, err = ParseClearance(d.ClearanceStr); err != nil {
		return Destination{}, err
	}
	if d.Installation, err = s.Installation(ctx, tenant, instID); err != nil {
		return Destination{}, err
	}
	return d, nil
}

// destinationTarget validates a destination's clearance and channel id and resolves its
// installation ("" takes the tenant's newest active one): the rules every destination shares.
func (s *Store) destinationTarget(ctx context.Context, tenant domain.TenantID, clearance, channel, installation string) (Installation, domain.Classification, error) {
	cl, err := ParseClearance(clearance)
	if err != nil {
		return Installation{}, cl, err
	}
	if channel == "" || (channel[0] != 'C' && channel[0] != 'G') {
		return Installation{}, cl, domain.Invalid("channel", "must be a channel id (C…/G…)")
	}
	if installation == "" {
		if installation, err = s.NewestInstallation(ctx, tenant); err != nil {
			return Installation{}, cl, err
		}
	}
	in, err := s.Installation(ctx, tenant, installation)
	return in, cl, err
}

// InstallationOfKey returns a tenant's active installation with an installation key (the key a
// thread mapping records), for effects that must act where something was posted whatever the
// destinations say now; domain.ErrNotFound otherwise.
func (s *Store) InstallationOfKey(ctx context.Context, tenant domain.TenantID, key string) (Installation, error) {
	var id string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT id FROM slack_installations WHERE tenant_id = ? AND install_key = ? AND active = 1
		ORDER BY installed_at DESC LIMIT 1`), tenant, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Installation{}, fmt.Errorf("installation: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Installation{}, err
	}
	return s.Installation(ctx, tenant, id)
}
