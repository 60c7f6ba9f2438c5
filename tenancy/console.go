package tenancy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// consoleMigrations add the console's sessions and each tenant's public profile (display name and
// intake categories). They are their own migration component, apart from the tenancy tables.
var consoleMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS console_sessions (
	hash       TEXT   PRIMARY KEY,
	token_hash TEXT   NOT NULL REFERENCES api_tokens (hash),
	csrf       TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	ended_at   BIGINT
);
CREATE INDEX IF NOT EXISTS console_sessions_token ON console_sessions (token_hash);
CREATE TABLE IF NOT EXISTS tenant_profiles (
	tenant_id  TEXT PRIMARY KEY REFERENCES tenants (id),
	name       TEXT NOT NULL DEFAULT '',
	categories TEXT NOT NULL DEFAULT '[]'
)`}}

// Session is a signed-in console session. Its secret (the cookie value) is never stored: the
// table keeps its hash. CSRF is the token every form of the session must carry.
type Session struct {
	CSRF      string
	ExpiresAt time.Time
}

// ErrNoSession: the cookie names no live session (unknown, ended, expired, or its token revoked
// or expired). It is domain.ErrUnauthenticated.
var ErrNoSession = fmt.Errorf("console session: %w", domain.ErrUnauthenticated)

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// StartSession signs in with an operator token: it returns the principal, the session and the
// session's secret. The session ends at ttl or at the token's own expiry, whichever is first; it
// lasts only while its token is valid (a revoked token ends every session made with it). A valid
// token of a disabled principal is domain.ErrPrincipalDisabled, returned with that principal so
// the refusal can be audited (it must not be used for anything else).
func (s *Store) StartSession(ctx context.Context, token string, ttl time.Duration) (domain.Principal, Session, string, error) {
	p, err := s.Authenticate(ctx, token)
	if errors.Is(err, domain.ErrPrincipalDisabled) {
		return p, Session{}, "", err
	}
	if err == nil {
		// The console is for people who read inquiries; an integration's token signs nobody in.
		err = domain.Authorize(p, domain.ActRead)
	}
	if err != nil {
		return domain.Principal{}, Session{}, "", err
	}
	now := s.now()
	exp := now.Add(ttl)
	var tokExp sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT expires_at FROM api_tokens WHERE hash = ?`), HashToken(token)).Scan(&tokExp); err != nil {
		return domain.Principal{}, Session{}, "", fmt.Errorf("start session: %w", err)
	}
	if tokExp.Valid && tokExp.Int64 < exp.UnixNano() {
		exp = time.Unix(0, tokExp.Int64)
	}
	// Sessions over for a day are of no further use: each sign-in clears them.
	if _, err := s.db.ExecContext(ctx, s.db.Rebind(`DELETE FROM console_sessions WHERE expires_at < ? OR ended_at < ?`),
		now.Add(-24*time.Hour).UnixNano(), now.Add(-24*time.Hour).UnixNano()); err != nil {
		return domain.Principal{}, Session{}, "", fmt.Errorf("start session: %w", err)
	}
	secret := "cs_" + randomString(32)
	sess := Session{CSRF: randomString(24), ExpiresAt: exp.UTC()}
	if _, err := s.db.ExecContext(ctx, s.db.Rebind(`INSERT INTO console_sessions (hash, token_hash, csrf, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)`), HashToken(secret), HashToken(token), sess.CSRF, now.UnixNano(), exp.UnixNano()); err != nil {
		return domain.Principal{}, Session{}, "", fmt.Errorf("start session: %w", err)
	}
	return p, sess, secret, nil
}

// SessionPrincipal resolves a session secret to its principal, checking on every call that the
// session and its token are still valid and its principal enabled. Anything else is ErrNoSession.
func (s *Store) SessionPrincipal(ctx context.Context, secret string) (domain.Principal, Session, error) {
	if !strings.HasPrefix(secret, "cs_") || len(secret) > 100 {
		return domain.Principal{}, Session{}, ErrNoSession
	}
	var p domain.Principal
	var sess Session
	var exp int64
	var ended, tokExp, revoked sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT `+principalCols("p")+`, c.csrf, c.expires_at, c.ended_at,
		t.expires_at, t.revoked_at FROM console_sessions c JOIN api_tokens t ON t.hash = c.token_hash
		JOIN principals p ON p.id = t.principal_id WHERE c.hash = ?`), HashToken(secret)).
		Scan(&p.ID, &p.TenantID, &p.Name, &p.Role, &p.Team, &p.Disabled, &sess.CSRF, &exp, &ended, &tokExp, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Principal{}, Session{}, ErrNoSession
	}
	if err != nil {
		return domain.Principal{}, Session{}, fmt.Errorf("session: %w", err)
	}
	now := s.now().UnixNano()
	if ended.Valid || revoked.Valid || p.Disabled || now >= exp || (tokExp.Valid && now >= tokExp.Int64) {
		return domain.Principal{}, Session{}, ErrNoSession
	}
	sess.ExpiresAt = time.Unix(0, exp).UTC()
	return p, sess, nil
}

// EndSession signs a session out; an unknown or ended session is not an error.
func (s *Store) EndSession(ctx context.Context, secret string) error {
	_, err := s.db.ExecContext(ctx, s.db.Rebind(`UPDATE console_sessions SET ended_at = ? WHERE hash = ? AND ended_at IS NULL`),
		s.now().UnixNano(), HashToken(secret))
	return err
}

// Category is an intake category a tenant offers on its public form.
type Category struct {
	Slug  string `json:"slug"`
	Label string `json:"label"`
}

// Profile is what a tenant shows the public: its display name and categories.
type Profile struct {
	Name       string     `json:"name"`
	Categories []Category `json:"categories"`
}

// Profile returns a tenant's public profile. A tenant without one shows its slug and offers no
// categories.
func (s *Store) Profile(ctx context.Context, t Tenant) (Profile, error) {
	var name, cats sql.NullString
	err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT name, categories FROM tenant_profiles WHERE tenant_id = ?`), t.ID).Scan(&name, &cats)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Profile{}, fmt.Errorf("profile: %w", err)
	}
	return profileOf(t, name, cats)
}

// profileOf is t's profile from its tenant_profiles row (both invalid when it has none).
func profileOf(t Tenant, name, cats sql.NullString) (Profile, error) {
	if !name.Valid && !cats.Valid {
		return Profile{Name: t.Slug}, nil
	}
	p := Profile{Name: name.String}
	if err := json.Unmarshal([]byte(cats.String), &p.Categories); err != nil {
		return Profile{}, fmt.Errorf("profile categories: %w", err)
	}
	if p.Name == "" {
		p.Name = t.Slug
	}
	return p, nil
}

// SetProfile sets the display name (nil: unchanged) and categories (nil: unchanged) of the tenant
// with slug, and returns the profile. Names are 1-100 characters; categories are lowercase slugs
// (the domain's rule) with labels of at most 100 characters, at most 50 of them.
func (s *Store) SetProfile(ctx context.Context, slug string, name *string, cats []Category) (Profile, error) {
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return Profile{}, err
	}
	cur, err := s.Profile(ctx, t)
	if err != nil {
		return Profile{}, err
	}
	if name != nil {
		n := strings.TrimSpace(*name)
		if err := domain.CheckText("name", n, true, 100, false); err != nil {
			return Profile{}, err
		}
		cur.Name = n
	}
	if cats != nil {
		if len(cats) > 50 {
			return Profile{}, domain.Invalid("category", "at most 50 categories")
		}
		seen := map[string]bool{}
		for i, c := range cats {
			if err := domain.CheckCategory(c.Slug); err != nil || c.Slug == "" || seen[c.Slug] {
				return Profile{}, domain.Invalid("category", "%q must be a distinct lowercase slug (a-z, 0-9, - and _)", c.Slug)
			}
			seen[c.Slug] = true
			cats[i].Label = strings.TrimSpace(c.Label)
			if cats[i].Label == "" {
				cats[i].Label = c.Slug
			}
			if err := domain.CheckText("category", cats[i].Label, true, 100, false); err != nil {
				return Profile{}, domain.Invalid("category", "label of %q: must be visible text of at most 100 characters", c.Slug)
			}
		}
		cur.Categories = cats
	}
	b, err := json.Marshal(cur.Categories)
	if err != nil {
		return Profile{}, err
	}
	if cur.Categories == nil {
		b = []byte("[]")
	}
	defer s.forgetPublic(slug)
	if _, err := s.db.ExecContext(ctx, s.db.Rebind(`INSERT INTO tenant_profiles (tenant_id, name, categories) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET name = excluded.name, categories = excluded.categories`), t.ID, cur.Name, string(b)); err != nil {
		return Profile{}, fmt.Errorf("set profile: %w", err)
	}
	return cur, nil
}

// Principals lists a tenant's principals by name.
func (s *Store) Principals(ctx context.Context, tenant domain.TenantID) ([]domain.Principal, error) {
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(`SELECT `+principalCols("p")+` FROM principals p WHERE p.tenant_id = ?
		ORDER BY p.name, p.id`), tenant)
	if err != nil {
		return nil, fmt.Errorf("principals: %w", err)
	}
	defer rows.Close()
	var out []domain.Principal
	for rows.Next() {
		var p domain.Principal
		if err := rows.Scan(&p.ID, &p.TenantID, &p.Name, &p.Role, &p.Team, &p.Disabled); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// TenantTokens lists the tokens of a tenant's principals (never their secrets).
func (s *Store) TenantTokens(ctx context.Context, tenant domain.TenantID) ([]TokenInfo, error) {
	return s.tokens(ctx, `p.tenant_id = ?`, tenant)
}

// RevokeTenantToken revokes a token of the tenant; another tenant's token is domain.ErrNotFound.
func (s *Store) RevokeTenantToken(ctx context.Context, tenant domain.TenantID, id string) error {
	if _, err := s.TokenInfo(ctx, tenant, id); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, s.db.Rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`),
		s.now().UnixNano(), id)
	return err
}
