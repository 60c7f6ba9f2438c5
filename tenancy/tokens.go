package tenancy

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// migrationTokensOrigins gives tokens a public id (for listing and revoking) and adds each tenant's
// trusted browser origins for the public intake.
var migrationTokensOrigins = sqldb.Migration{Version: 2, SQL: `
ALTER TABLE api_tokens ADD COLUMN id TEXT;
UPDATE api_tokens SET id = 'tok_' || substr(hash, 1, 16) WHERE id IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS api_tokens_id ON api_tokens (id);
CREATE INDEX IF NOT EXISTS api_tokens_principal ON api_tokens (principal_id);
CREATE TABLE IF NOT EXISTS tenant_origins (
	tenant_id TEXT NOT NULL REFERENCES tenants (id),
	origin    TEXT NOT NULL,
	PRIMARY KEY (tenant_id, origin)
)`}

// TokenID is a token's public handle: "tok_" and 16 hex digits of its hash. It cannot be used to
// authenticate.
func TokenID(token string) string { return "tok_" + HashToken(token)[:16] }

// TokenInfo describes a token without its secret.
type TokenInfo struct {
	ID          string             `json:"token_id"`
	PrincipalID domain.PrincipalID `json:"principal_id"`
	CreatedAt   time.Time          `json:"created_at"`
	ExpiresAt   *time.Time         `json:"expires_at"`
	RevokedAt   *time.Time         `json:"revoked_at"`
}

func (s *Store) insertToken(ctx context.Context, tx *sql.Tx, p domain.PrincipalID, token string, ttl time.Duration) error {
	now := s.now()
	var expires sql.NullInt64
	if ttl > 0 {
		expires = sql.NullInt64{Int64: now.Add(ttl).UnixNano(), Valid: true}
	}
	_, err := tx.ExecContext(ctx, s.db.Rebind(`INSERT INTO api_tokens (hash, id, principal_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`),
		HashToken(token), TokenID(token), p, now.UnixNano(), expires)
	return err
}

// CreateToken mints another token for a principal of the tenant with slug. ttl zero never expires;
// a negative ttl is refused. A principal of another tenant is domain.ErrNotFound.
func (s *Store) CreateToken(ctx context.Context, slug string, principal domain.PrincipalID, ttl time.Duration) (TokenInfo, string, error) {
	if ttl < 0 {
		return TokenInfo{}, "", domain.Invalid("ttl", "must not be negative")
	}
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return TokenInfo{}, "", err
	}
	if _, err := s.Principal(ctx, t.ID, principal); err != nil {
		return TokenInfo{}, "", err
	}
	token := NewToken()
	if err := sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error { return s.insertToken(ctx, tx, principal, token, ttl) }); err != nil {
		return TokenInfo{}, "", err
	}
	info, err := s.TokenInfo(ctx, t.ID, TokenID(token))
	return info, token, err
}

// TokenInfo describes the token id of tenant; a token of another tenant is domain.ErrNotFound.
func (s *Store) TokenInfo(ctx context.Context, tenant domain.TenantID, id string) (TokenInfo, error) {
	list, err := s.tokens(ctx, `t.id = ? AND p.tenant_id = ?`, id, tenant)
	if err != nil {
		return TokenInfo{}, err
	}
	if len(list) == 0 {
		return TokenInfo{}, fmt.Errorf("token: %w", domain.ErrNotFound)
	}
	return list[0], nil
}

// Tokens lists the tokens of the tenant with slug, or of one of its principals when principal is set.
func (s *Store) Tokens(ctx context.Context, slug string, principal domain.PrincipalID) ([]TokenInfo, error) {
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return nil, err
	}
	if principal != "" {
		return s.tokens(ctx, `p.tenant_id = ? AND p.id = ?`, t.ID, principal)
	}
	return s.tokens(ctx, `p.tenant_id = ?`, t.ID)
}

func (s *Store) tokens(ctx context.Context, where string, args ...any) ([]TokenInfo, error) {
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(`SELECT t.id, t.principal_id, t.created_at, t.expires_at, t.revoked_at
		FROM api_tokens t JOIN principals p ON p.id = t.principal_id WHERE `+where+` ORDER BY t.created_at, t.id`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TokenInfo
	for rows.Next() {
		var ti TokenInfo
		var created int64
		var expires, revoked sql.NullInt64
		if err := rows.Scan(&ti.ID, &ti.PrincipalID, &created, &expires, &revoked); err != nil {
			return nil, err
		}
		ti.CreatedAt = time.Unix(0, created).UTC()
		ti.ExpiresAt, ti.RevokedAt = nanoTime(expires), nanoTime(revoked)
		out = append(out, ti)
	}
	return out, rows.Err()
}

func nanoTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.Unix(0, v.Int64).UTC()
	return &t
}

// RevokeToken revokes the token id of the tenant with slug; from then on it authenticates exactly
// like an unknown token. Revoking twice keeps the first time. Another tenant's token is
// domain.ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, slug, id string) error {
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return err
	}
	if _, err := s.TokenInfo(ctx, t.ID, id); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, s.db.Rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`),
		s.now().UnixNano(), id)
	return err
}

// RevokePrincipalTokens revokes every token of a principal of the tenant with slug and returns how
// many were newly revoked.
func (s *Store) RevokePrincipalTokens(ctx context.Context, slug string, principal domain.PrincipalID) (int, error) {
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return 0, err
	}
	if _, err := s.Principal(ctx, t.ID, principal); err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, s.db.Rebind(`UPDATE api_tokens SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL`),
		s.now().UnixNano(), principal)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// NormalizeOrigin returns origin as browsers send it in the Origin header (lowercase
// scheme://host[:port], default port omitted), or a validation error. Only http and https qualify.
func NormalizeOrigin(origin string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", domain.Invalid("origin", "must look like https://host[:port], without path, query or credentials")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	out := u.Scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	return out, nil
}

// SetOrigins replaces the trusted browser origins of the tenant with slug and returns them
// normalized. Browsers on these origins may submit to the tenant's public intake; an empty list
// allows only same-origin and non-browser submissions.
func (s *Store) SetOrigins(ctx context.Context, slug string, origins []string) ([]string, error) {
	norm := make([]string, 0, len(origins))
	for _, o := range origins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		norm = append(norm, n)
	}
	slices.Sort(norm)
	norm = slices.Compact(norm)
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return nil, err
	}
	defer s.forgetPublic(slug)
	err = sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.db.Rebind(`DELETE FROM tenant_origins WHERE tenant_id = ?`), t.ID); err != nil {
			return err
		}
		for _, o := range norm {
			if _, err := tx.ExecContext(ctx, s.db.Rebind(`INSERT INTO tenant_origins (tenant_id, origin) VALUES (?, ?)`), t.ID, o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return norm, nil
}

// lookupPublic reads a tenant by slug with its trusted origins and its public profile, in one
// query. An unknown slug is domain.ErrNotFound.
func (s *Store) lookupPublic(ctx context.Context, slug string) (publicEntry, error) {
	if !slugRE.MatchString(slug) { // no tenant can have it: answered without a statement
		return publicEntry{}, fmt.Errorf("tenant %.64q: %w", slug, domain.ErrNotFound)
	}
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(`SELECT t.id, t.slug, o.origin, p.name, p.categories FROM tenants t
		LEFT JOIN tenant_origins o ON o.tenant_id = t.id LEFT JOIN tenant_profiles p ON p.tenant_id = t.id
		WHERE t.slug = ? ORDER BY o.origin`), slug)
	if err != nil {
		return publicEntry{}, err
	}
	defer rows.Close()
	var t Tenant
	var origins []string
	var name, cats sql.NullString
	for rows.Next() {
		var o sql.NullString
		if err := rows.Scan(&t.ID, &t.Slug, &o, &name, &cats); err != nil {
			return publicEntry{}, err
		}
		if o.Valid {
			origins = append(origins, o.String)
		}
	}
	if err := rows.Err(); err != nil {
		return publicEntry{}, err
	}
	if t.ID == "" {
		return publicEntry{}, fmt.Errorf("tenant %q: %w", slug, domain.ErrNotFound)
	}
	p, err := profileOf(t, name, cats)
	if err != nil {
		return publicEntry{}, err
	}
	return publicEntry{tenant: t, origins: origins, profile: p}, nil
}
