package slackinstall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// What Slack callbacks need: installations by key and the Slack user → principal links.

var linkMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_user_links (
	install_key   TEXT   NOT NULL,
	slack_user_id TEXT   NOT NULL,
	tenant_id     TEXT   NOT NULL,
	principal_id  TEXT   NOT NULL,
	linked_at     BIGINT NOT NULL,
	PRIMARY KEY (install_key, slack_user_id)
)`}}

// SlackUserLinked is the audit event of a link (installation-{tenant} stream).
type SlackUserLinked struct {
	Installation string `json:"installation"` // installation key
	SlackUser    string `json:"slack_user"`
	Principal    string `json:"principal"`
}

// SlackInstallationDisabled is the audit event of an uninstall or token revocation.
type SlackInstallationDisabled struct {
	Installation string `json:"installation"` // installation key
	Reason       string `json:"reason"`
	EventID      string `json:"event_id,omitempty"`
}

// Signing is an active installation's identity and signing secret.
type Signing struct {
	InstallationID string
	Tenant         domain.TenantID
	Key            string
	Secret         string
}

// SigningSecrets returns the app's signing secret (when configured, first, with no installation)
// and every active installation's own, for verifying a request before anything in it is read.
func (s *Store) SigningSecrets(ctx context.Context) ([]Signing, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT id, tenant_id, install_key, signing_sealed FROM slack_installations WHERE active = 1 ORDER BY installed_at`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Signing
	if s.AppSigningSecret != "" {
		out = append(out, Signing{Secret: s.AppSigningSecret})
	}
	for rows.Next() {
		var g Signing
		var sealed string
		if err := rows.Scan(&g.InstallationID, &g.Tenant, &g.Key, &sealed); err != nil {
			return nil, err
		}
		if g.Secret, err = s.Sealer.Open(sealed, g.InstallationID+"/signing_secret"); err != nil {
			return nil, err
		}
		if g.Secret != "" {
			out = append(out, g)
		}
	}
	return out, rows.Err()
}

// InstallationByKey returns the active installation with an installation key and its signing
// secret: its own, else the app's. An unknown key, or one with no secret at all, is
// domain.ErrNotFound.
func (s *Store) InstallationByKey(ctx context.Context, key string) (Installation, string, error) {
	var tenant domain.TenantID
	var id string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT id, tenant_id FROM slack_installations WHERE install_key = ? AND active = 1`), key).Scan(&id, &tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return Installation{}, "", fmt.Errorf("installation: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Installation{}, "", err
	}
	in, err := s.Installation(ctx, tenant, id)
	if err != nil {
		return Installation{}, "", err
	}
	sec, err := s.SigningSecret(ctx, tenant, id)
	if err == nil && sec == "" {
		if sec = s.AppSigningSecret; sec == "" {
			return Installation{}, "", fmt.Errorf("installation has no signing secret: %w", domain.ErrNotFound)
		}
	}
	return in, sec, err
}

// LinkUser links a Slack user of the tenant's installation (the newest active one when
// installation is "") to a principal, replacing an earlier link of that user. The caller checks
// that the principal belongs to the tenant.
func (s *Store) LinkUser(ctx context.Context, tenant domain.TenantID, installation, slackUser string, principal domain.PrincipalID) (string, error) {
	if slackUser == "" || (slackUser[0] != 'U' && slackUser[0] != 'W') || strings.ContainsAny(slackUser, " /#") {
		return "", domain.Invalid("slack_user", "must be a Slack user id (U…/W…)")
	}
	var key string
	q := `SELECT install_key FROM slack_installations WHERE tenant_id = ? AND active = 1 ORDER BY installed_at DESC LIMIT 1`
	args := []any{tenant}
	if installation != "" {
		q = `SELECT install_key FROM slack_installations WHERE tenant_id = ? AND active = 1 AND id = ?`
		args = append(args, installation)
	}
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(q), args...).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", domain.Invalid("tenant", "has no such Slack installation: run casebook slack install first")
	}
	if err != nil {
		return "", err
	}
	_, err = s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_user_links (install_key, slack_user_id, tenant_id, principal_id, linked_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (install_key, slack_user_id) DO UPDATE SET tenant_id = excluded.tenant_id,
		principal_id = excluded.principal_id, linked_at = excluded.linked_at`), key, slackUser, tenant, principal, s.Now().UnixNano())
	if err != nil {
		return "", err
	}
	_, err = AppendEvent(ctx, s.Events, InstallationStream(tenant), eventstore.Any(), tenant, Actor,
		fmt.Sprintf("slack-link:%s:%s:%s:%d", key, slackUser, principal, s.Now().UnixNano()), s.Now(),
		"SlackUserLinked", SlackUserLinked{Installation: key, SlackUser: slackUser, Principal: string(principal)})
	return key, err
}

// LinkedPrincipal returns the principal a Slack user of an installation is linked to, inside the
// installation's tenant. No link is domain.ErrNotFound.
func (s *Store) LinkedPrincipal(ctx context.Context, tenant domain.TenantID, key, slackUser string) (domain.PrincipalID, error) {
	var p domain.PrincipalID
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT principal_id FROM slack_user_links
		WHERE install_key = ? AND slack_user_id = ? AND tenant_id = ?`), key, slackUser, tenant).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("slack user: %w", domain.ErrNotFound)
	}
	return p, err
}

// RecordDisabled records the audit event of an uninstall or token revocation once per eventID.
// Stopping the installation's effects is slackeffects' part (Guard.DisableInstallation).
func (s *Store) RecordDisabled(ctx context.Context, tenant domain.TenantID, key, reason, eventID string) error {
	_, err := AppendEvent(ctx, s.Events, InstallationStream(tenant), eventstore.Any(), tenant, Actor, "slack-disable:"+key+":"+eventID, s.Now(),
		"SlackInstallationDisabled", SlackInstallationDisabled{Installation: key, Reason: reason, EventID: eventID})
	return err
}

// InstallationKeys lists the keys of a tenant's installations, active or not.
func (s *Store) InstallationKeys(ctx context.Context, tenant domain.TenantID) ([]string, error) {
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT DISTINCT install_key FROM slack_installations WHERE tenant_id = ? ORDER BY install_key`), tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// SlackUsersOf maps principals of tenant to the Slack user linked to each in the installation
// with key (the newest link when a principal has several). Principals without a link are absent:
// a message names them without a mention.
func (s *Store) SlackUsersOf(ctx context.Context, tenant domain.TenantID, key string, principals []domain.PrincipalID) (map[domain.PrincipalID]string, error) {
	out := map[domain.PrincipalID]string{}
	if len(principals) == 0 {
		return out, nil
	}
	want := map[domain.PrincipalID]bool{}
	for _, p := range principals {
		want[p] = true
	}
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT principal_id, slack_user_id FROM slack_user_links
		WHERE install_key = ? AND tenant_id = ? ORDER BY linked_at, slack_user_id`), key, tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var p domain.PrincipalID
		var u string
		if err := rows.Scan(&p, &u); err != nil {
			return nil, err
		}
		if want[p] {
			out[p] = u // later links win
		}
	}
	return out, rows.Err()
}

// SlackUserUnlinked is the audit event of an unlink (installation-{tenant} stream); By is who did it.
type SlackUserUnlinked struct {
	Installation string `json:"installation"` // installation key
	SlackUser    string `json:"slack_user"`
	Principal    string `json:"principal"`
	By           string `json:"by"`
}

// UserLink is one Slack user linked to a principal in one installation.
type UserLink struct {
	Installation string             `json:"installation"` // installation key
	SlackUser    string             `json:"slack_user"`
	Principal    domain.PrincipalID `json:"principal_id"`
}

// Links lists a tenant's Slack user links, by principal then installation.
func (s *Store) Links(ctx context.Context, tenant domain.TenantID) ([]UserLink, error) {
	return s.links(ctx, `SELECT install_key, slack_user_id, principal_id FROM slack_user_links
		WHERE tenant_id = ? ORDER BY principal_id, install_key, slack_user_id`, tenant)
}

// links runs q, which selects install key, Slack user and principal.
func (s *Store) links(ctx context.Context, q string, args ...any) ([]UserLink, error) {
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []UserLink
	for rows.Next() {
		var l UserLink
		if err := rows.Scan(&l.Installation, &l.SlackUser, &l.Principal); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// UnlinkUser removes the links of a Slack user in the tenant's installations (one installation
// when installation, an installation id, is set) and records SlackUserUnlinked for each, by by.
// From the next request on the user's clicks are refused as unlinked. A user with no link in the
// tenant is domain.ErrNotFound.
func (s *Store) UnlinkUser(ctx context.Context, tenant domain.TenantID, installation, slackUser, by string) ([]UserLink, error) {
	if by == "" {
		return nil, domain.Invalid("by", "is required: the change is audited")
	}
	q := `SELECT l.install_key, l.slack_user_id, l.principal_id FROM slack_user_links l WHERE l.tenant_id = ? AND l.slack_user_id = ?`
	args := []any{tenant, slackUser}
	if installation != "" {
		q += ` AND l.install_key IN (SELECT install_key FROM slack_installations WHERE tenant_id = ? AND id = ?)`
		args = append(args, tenant, installation)
	}
	links, err := s.links(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("slack user %q is not linked in this tenant: %w", slackUser, domain.ErrNotFound)
	}
	for _, l := range links {
		if _, err := s.DB.ExecContext(ctx, s.DB.Rebind(`DELETE FROM slack_user_links WHERE install_key = ? AND slack_user_id = ? AND tenant_id = ?`),
			l.Installation, l.SlackUser, tenant); err != nil {
			return nil, err
		}
		if _, err := AppendEvent(ctx, s.Events, InstallationStream(tenant), eventstore.Any(), tenant, by,
			fmt.Sprintf("slack-unlink:%s:%s:%d", l.Installation, l.SlackUser, s.Now().UnixNano()), s.Now(),
			"SlackUserUnlinked", SlackUserUnlinked{Installation: l.Installation, SlackUser: l.SlackUser, Principal: string(l.Principal), By: by}); err != nil {
			return nil, err
		}
	}
	return links, nil
}
