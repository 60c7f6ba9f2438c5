// Package tenancy stores tenants, principals and operator API tokens, and the instance secret that
// keys derived identifiers. This access-control state is relational, not event sourced: an
// authentication must see a principal the moment it is created, from any process.
//
// Tokens are random (256 bits), shown once, and stored as SHA-256 hashes; a lookup of an unknown,
// revoked or expired token fails closed with domain.ErrUnauthenticated.
//
// The one exception is PublicTenant, the public routes' tenant lookup, which may serve an answer
// from memory for Store.PublicCacheTTL (see there).
package tenancy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/coalesce"
	"github.com/casebook/casebook/internal/sqldb"
)

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS tenants (
	id         TEXT   PRIMARY KEY,
	slug       TEXT   NOT NULL UNIQUE,
	created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS principals (
	id         TEXT   PRIMARY KEY,
	tenant_id  TEXT   NOT NULL REFERENCES tenants (id),
	name       TEXT   NOT NULL,
	role       TEXT   NOT NULL,
	team       TEXT   NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_tokens (
	hash         TEXT   PRIMARY KEY,
	principal_id TEXT   NOT NULL REFERENCES principals (id),
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT,
	revoked_at   BIGINT
);
CREATE TABLE IF NOT EXISTS settings (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
)`}, migrationTokensOrigins, migrationDisabled}

// Tenant is an organisation using Casebook.
type Tenant struct {
	ID   domain.TenantID `json:"tenant_id"`
	Slug string          `json:"slug"`
}

// Store is the tenancy store on SQLite or Postgres.
type Store struct {
	db  *sqldb.DB
	now func() time.Time
	// TokenTTL is the lifetime of the first token of a new tenant or principal; zero never expires.
	TokenTTL time.Duration
	// PublicCacheTTL is how long PublicTenant may serve an answer from memory; zero reads the
	// database every time. Set it before the Store is used.
	PublicCacheTTL time.Duration
	public         publicCache
	// tokenReads shares Authenticate's reads of one token among its concurrent requests.
	tokenReads coalesce.Group[string, tokenRow]
}

// tokenRow is a token's row as Authenticate reads it; found is false when there is none.
type tokenRow struct {
	p                domain.Principal
	expires, revoked sql.NullInt64
	found            bool
}

// New migrates the tenancy tables and returns a store.
func New(ctx context.Context, db *sqldb.DB, now func() time.Time) (*Store, error) {
	if err := sqldb.Migrate(ctx, db, "tenancy", migrations); err != nil {
		return nil, err
	}
	if err := sqldb.Migrate(ctx, db, "tenancy_console", consoleMigrations); err != nil {
		return nil, err
	}
	if err := sqldb.Migrate(ctx, db, "tenancy_portal_view", portalViewMigrations); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}, nil
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,39}$`)

// NewID returns a random UUIDv4.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NewToken returns a fresh operator API token.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "cb_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken is the stored form of a token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateTenant creates a tenant with slug and its first admin principal, and returns the admin's
// token. A taken slug is domain.ErrConflict.
func (s *Store) CreateTenant(ctx context.Context, slug string) (Tenant, domain.Principal, string, error) {
	if !slugRE.MatchString(slug) {
		return Tenant{}, domain.Principal{}, "", domain.Invalid("slug", "must be 2-40 characters of a-z, 0-9 and -, starting with a letter or digit")
	}
	t := Tenant{ID: domain.TenantID(NewID()), Slug: slug}
	p := domain.Principal{ID: domain.PrincipalID(NewID()), TenantID: t.ID, Name: "admin", Role: domain.RoleAdmin}
	token := NewToken()
	defer s.forgetPublic(slug)
	err := sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.db.Rebind(`SELECT count(*) FROM tenants WHERE slug = ?`), slug).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("tenant %q: %w", slug, domain.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, s.db.Rebind(`INSERT INTO tenants (id, slug, created_at) VALUES (?, ?, ?)`),
			t.ID, t.Slug, s.now().UnixNano()); err != nil {
			return err
		}
		return s.insertPrincipal(ctx, tx, p, token)
	})
	if err != nil {
		return Tenant{}, domain.Principal{}, "", err
	}
	return t, p, token, nil
}

func (s *Store) insertPrincipal(ctx context.Context, tx *sql.Tx, p domain.Principal, token string) error {
	now := s.now().UnixNano()
	if _, err := tx.ExecContext(ctx, s.db.Rebind(`INSERT INTO principals (id, tenant_id, name, role, team, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		p.ID, p.TenantID, p.Name, p.Role, p.Team, now); err != nil {
		return err
	}
	return s.insertToken(ctx, tx, p.ID, token, s.TokenTTL)
}

// CreatePrincipal adds a principal to the tenant with slug and returns it with its first token.
func (s *Store) CreatePrincipal(ctx context.Context, slug, name string, role domain.Role, team string) (domain.Principal, string, error) {
	name, team = strings.TrimSpace(name), strings.TrimSpace(team)
	if err := domain.CheckName("name", name, true); err != nil {
		return domain.Principal{}, "", err
	}
	if len(team) > 64 {
		return domain.Principal{}, "", domain.Invalid("team", "must be at most 64 characters")
	}
	if _, err := domain.ParseRole(string(role)); err != nil {
		return domain.Principal{}, "", err
	}
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return domain.Principal{}, "", err
	}
	p := domain.Principal{ID: domain.PrincipalID(NewID()), TenantID: t.ID, Name: name, Role: role, Team: team}
	token := NewToken()
	if err := sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error { return s.insertPrincipal(ctx, tx, p, token) }); err != nil {
		return domain.Principal{}, "", err
	}
	return p, token, nil
}

// TenantBySlug finds a tenant; an unknown slug is domain.ErrNotFound.
func (s *Store) TenantBySlug(ctx context.Context, slug string) (Tenant, error) {
	var t Tenant
	err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT id, slug FROM tenants WHERE slug = ?`), slug).Scan(&t.ID, &t.Slug)
	if errors.Is(err, sql.ErrNoRows) {
		return Tenant{}, fmt.Errorf("tenant %q: %w", slug, domain.ErrNotFound)
	}
	return t, err
}

// Principal finds a principal inside tenant, a disabled one too (Disabled says so, and
// domain.Authorize refuses it); one of another tenant is domain.ErrNotFound.
func (s *Store) Principal(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) (domain.Principal, error) {
	var p domain.Principal
	err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT `+principalCols("p")+` FROM principals p WHERE p.id = ? AND p.tenant_id = ?`),
		id, tenant).Scan(&p.ID, &p.TenantID, &p.Name, &p.Role, &p.Team, &p.Disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Principal{}, fmt.Errorf("principal: %w", domain.ErrNotFound)
	}
	return p, err
}

// Authenticate resolves a bearer token to its principal. Unknown, revoked and expired tokens are
// domain.ErrUnauthenticated; a valid token of a disabled principal is domain.ErrPrincipalDisabled,
// returned with that principal so the refusal can be audited (it must not be used for anything else).
func (s *Store) Authenticate(ctx context.Context, token string) (domain.Principal, error) {
	if !strings.HasPrefix(token, "cb_") {
		return domain.Principal{}, domain.ErrUnauthenticated
	}
	// Concurrent requests with one token share a read that began after each arrived: a revocation
	// committed before a request is always seen by it.
	hash := HashToken(token)
	row, err := s.tokenReads.Do(ctx, hash, func(ctx context.Context) (tokenRow, error) {
		var r tokenRow
		err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT `+principalCols("p")+`, t.expires_at, t.revoked_at
		FROM api_tokens t JOIN principals p ON p.id = t.principal_id WHERE t.hash = ?`), hash).
			Scan(&r.p.ID, &r.p.TenantID, &r.p.Name, &r.p.Role, &r.p.Team, &r.p.Disabled, &r.expires, &r.revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return r, nil
		}
		r.found = err == nil
		return r, err
	})
	if err != nil {
		return domain.Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	if !row.found {
		return domain.Principal{}, domain.ErrUnauthenticated
	}
	p, expires, revoked := row.p, row.expires, row.revoked
	if revoked.Valid || (expires.Valid && s.now().UnixNano() >= expires.Int64) {
		return domain.Principal{}, domain.ErrUnauthenticated
	}
	if p.Disabled {
		return p, domain.ErrPrincipalDisabled // the principal only for the caller's audit of the refusal
	}
	return p, nil
}

// Secret returns the instance secret used to derive the names intakes claim and their receipts,
// creating it on first use. Every process on the same database sees the same secret.
func (s *Store) Secret(ctx context.Context) ([]byte, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = 'instance_secret'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		var b [32]byte
		_, _ = rand.Read(b[:])
		if _, err := s.db.ExecContext(ctx, s.db.Rebind(`INSERT INTO settings (key, value) VALUES ('instance_secret', ?) ON CONFLICT (key) DO NOTHING`),
			hex.EncodeToString(b[:])); err != nil {
			return nil, fmt.Errorf("instance secret: %w", err)
		}
		return s.Secret(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("instance secret: %w", err)
	}
	return hex.DecodeString(v)
}
