// Package sealed is crypto-shredding for the event log: every inquiry has its own random data key
// (AES-256-GCM), kept only wrapped by its tenant's key in the inquiry_keys table, and Store seals
// the personal members of that inquiry's events (domain.PersonalFields) with it before they reach
// any backend. Erasure destroys the data key: the log is never rewritten, yet what it held of the
// person can no longer be read, on any backend and in any copy of the log.
//
// The key table lives in the SQL database of the deployment: the embedded SQLite file, or Postgres
// (also when events live in KurrentDB, whose deployment keeps its query model, checkpoints and keys
// in Postgres). Tenant keys are derived (HKDF-SHA256) from a master key given in configuration;
// each wrapped key records which master wrapped it (kek_id), so a master can be rotated: Rewrap
// wraps every live data key under the current one, after which the old master may be dropped.
package sealed

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/seal"
	"github.com/casebook/casebook/internal/sqldb"
)

// ErrErased: the inquiry's data key was destroyed. Nothing sealed with it can be opened again, and
// nothing is sealed with a new one.
var ErrErased = errors.New("sealed: the inquiry's data key was destroyed")

var keyMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS inquiry_keys (
	tenant_id  TEXT    NOT NULL,
	inquiry_id TEXT    NOT NULL,
	wrapped    BLOB,
	kek_id     TEXT    NOT NULL DEFAULT '',
	created_at BIGINT  NOT NULL,
	erased_at  BIGINT,
	PRIMARY KEY (tenant_id, inquiry_id)
)`, Postgres: `
CREATE TABLE IF NOT EXISTS inquiry_keys (
	tenant_id  TEXT    NOT NULL,
	inquiry_id TEXT    NOT NULL,
	wrapped    BYTEA,
	kek_id     TEXT    NOT NULL DEFAULT '',
	created_at BIGINT  NOT NULL,
	erased_at  BIGINT,
	PRIMARY KEY (tenant_id, inquiry_id)
)`}, {Version: 2, SQL: `CREATE INDEX IF NOT EXISTS inquiry_keys_kek ON inquiry_keys (kek_id) WHERE wrapped IS NOT NULL`}}

// DataKey is one inquiry's AEAD. Other stores of personal data about the inquiry (attachments)
// seal with it too, so that one erasure shreds them all.
type DataKey struct{ aead cipher.AEAD }

// Seal returns nonce || ciphertext of plain, bound to aad.
func (k *DataKey) Seal(plain, aad []byte) []byte {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	return k.aead.Seal(nonce, nonce, plain, aad)
}

// Open reverses Seal; a malformed, tampered or foreign value is seal.ErrOpen.
func (k *DataKey) Open(sealed, aad []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return nil, seal.ErrOpen
	}
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, seal.ErrOpen
	}
	return plain, nil
}

func newDataKey(raw []byte) (*DataKey, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &DataKey{aead: aead}, nil
}

// CacheTTL bounds how long an unwrapped data key is kept in memory. An erasure on this process
// drops it at once; another replica forgets it within CacheTTL.
const CacheTTL = time.Minute

const maxCache = 50000

// Keys is the key table.
type Keys struct {
	db      *sqldb.DB
	masters map[string][]byte // kek id → master key
	order   []string          // kek ids, current first
	current string
	now     func() time.Time

	mu    sync.Mutex
	cache map[ident]cached

	// derived holds each (master, tenant)'s keys once derived: every new inquiry wraps its data
	// key under its tenant's key, and every requester address is blind-indexed, so deriving them
	// per call (HKDF, then the AES key schedule) was a cost per intake. They are no more secret
	// than the masters, which the process holds anyway.
	derivedMu sync.Mutex
	derived   map[derivation]*tenantKeys
}

// maxDerived bounds derived; at the bound it starts over, as cache does.
const maxDerived = 10000

type derivation struct {
	kekID  string
	tenant domain.TenantID
}

// tenantKeys are one tenant's keys under one master: kek wraps its inquiries' data keys; blind is
// the HMAC key of its blind index.
type tenantKeys struct {
	kek   *seal.AEAD
	blind []byte
}

type ident struct {
	tenant domain.TenantID
	id     domain.InquiryID
}

type cached struct {
	key *DataKey
	at  time.Time
}

// KeyID names a master key without revealing it.
func KeyID(master []byte) string {
	sum := sha256.Sum256(append([]byte("casebook master key id\x00"), master...))
	return hex.EncodeToString(sum[:6])
}

// NewKeys migrates the key table in db. masters[0] wraps new data keys; the others only unwrap
// keys wrapped before a rotation. Each must be at least 32 bytes.
func NewKeys(ctx context.Context, db *sqldb.DB, now func() time.Time, masters ...[]byte) (*Keys, error) {
	if len(masters) == 0 {
		return nil, errors.New("sealed: no master key")
	}
	k := &Keys{db: db, masters: map[string][]byte{}, now: now, cache: map[ident]cached{}, derived: map[derivation]*tenantKeys{}}
	for i, m := range masters {
		if len(m) < 32 {
			return nil, errors.New("sealed: a master key needs at least 32 bytes")
		}
		id := KeyID(m)
		if _, dup := k.masters[id]; !dup {
			k.order = append(k.order, id)
		}
		k.masters[id] = m
		if i == 0 {
			k.current = id
		}
	}
	if k.now == nil {
		k.now = time.Now
	}
	if err := sqldb.Migrate(ctx, db, "inquiry_keys", keyMigrations); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Keys) kek(kekID string, tenant domain.TenantID) (*seal.AEAD, error) {
	tk, err := k.tenantKeys(kekID, tenant)
	if err != nil {
		return nil, err
	}
	return tk.kek, nil
}

// tenantKeys returns tenant's keys under the master kekID, derived on first use.
func (k *Keys) tenantKeys(kekID string, tenant domain.TenantID) (*tenantKeys, error) {
	d := derivation{kekID, tenant}
	k.derivedMu.Lock()
	tk := k.derived[d]
	k.derivedMu.Unlock()
	if tk != nil {
		return tk, nil
	}
	m, ok := k.masters[kekID]
	if !ok {
		return nil, fmt.Errorf("sealed: data key wrapped by unknown master key %s", kekID)
	}
	kek, err := seal.New(m, "casebook tenant key v1\x00"+string(tenant))
	if err != nil {
		return nil, err
	}
	blind, err := seal.Key(m, "casebook blind index v1\x00"+string(tenant))
	if err != nil {
		return nil, err
	}
	tk = &tenantKeys{kek: kek, blind: blind}
	k.derivedMu.Lock()
	defer k.derivedMu.Unlock()
	if len(k.derived) >= maxDerived {
		clear(k.derived)
	}
	k.derived[d] = tk
	return tk, nil
}

func aadOf(tenant domain.TenantID, id domain.InquiryID) []byte {
	return []byte(string(tenant) + "\x00" + string(id))
}

func (k *Keys) fromCache(i ident) *DataKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.cache[i]
	if !ok || k.now().Sub(c.at) > CacheTTL {
		return nil
	}
	return c.key
}

func (k *Keys) remember(i ident, dk *DataKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.cache) >= maxCache {
		clear(k.cache)
	}
	k.cache[i] = cached{key: dk, at: k.now()}
}

// Get returns the inquiry's data key; ErrErased once destroyed, (nil, nil) when it never had one
// (events written before sealing).
func (k *Keys) Get(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*DataKey, error) {
	i := ident{tenant, id}
	if dk := k.fromCache(i); dk != nil {
		return dk, nil
	}
	var wrapped []byte
	var kekID string
	err := k.db.QueryRowContext(ctx, k.db.Rebind(`SELECT wrapped, kek_id FROM inquiry_keys WHERE tenant_id = ? AND inquiry_id = ?`),
		string(tenant), string(id)).Scan(&wrapped, &kekID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sealed: read key: %w", err)
	}
	return k.unwrap(i, wrapped, kekID)
}

func (k *Keys) unwrap(i ident, wrapped []byte, kekID string) (*DataKey, error) {
	if wrapped == nil {
		return nil, ErrErased
	}
	kek, err := k.kek(kekID, i.tenant)
	if err != nil {
		return nil, err
	}
	raw, err := kek.Open(wrapped, aadOf(i.tenant, i.id))
	if err != nil {
		return nil, fmt.Errorf("sealed: unwrap the data key of %s: %w", i.id, err)
	}
	dk, err := newDataKey(raw)
	if err != nil {
		return nil, err
	}
	k.remember(i, dk)
	return dk, nil
}

// Ensure returns the inquiry's data key, creating it on first use. It never creates a key for an
// erased inquiry (ErrErased).
func (k *Keys) Ensure(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*DataKey, error) {
	dk, err := k.Get(ctx, tenant, id)
	if dk != nil || err != nil {
		return dk, err
	}
	return k.create(ctx, tenant, id)
}

// EnsureNew is Ensure for an inquiry that most likely has no key yet (its stream is being
// created): it tries the insert first, which costs one statement instead of a read, an insert and
// a read, and reads the stored key only when the insert found one (a retried intake, an erased
// inquiry's tombstone).
func (k *Keys) EnsureNew(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*DataKey, error) {
	if dk := k.fromCache(ident{tenant, id}); dk != nil {
		return dk, nil
	}
	return k.create(ctx, tenant, id)
}

// errKeyTaken: the inquiry already has a key row (or a tombstone), so a fresh key was not stored.
var errKeyTaken = errors.New("sealed: the inquiry already has a data key")

// fresh returns a new data key for an inquiry that most likely has none, and its row, which the
// append whose events the key seals stores in its own transaction (an eventstore.Companion): the
// key and those events commit together or not at all, in one commit instead of two. A row already
// there (an earlier attempt, a tombstone) fails the append with errKeyTaken; its caller then falls
// back to EnsureNew. The caller caches the key only once stored.
func (k *Keys) fresh(tenant domain.TenantID, id domain.InquiryID) (*DataKey, keyRow, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, keyRow{}, err
	}
	kek, err := k.kek(k.current, tenant)
	if err != nil {
		return nil, keyRow{}, err
	}
	dk, err := newDataKey(raw)
	if err != nil {
		return nil, keyRow{}, err
	}
	return dk, keyRow{string(tenant), string(id), kek.Seal(raw, aadOf(tenant, id)), k.current, k.now().UnixNano()}, nil
}

// keyRow is a new wrapped key's row of inquiry_keys, in keyColumns' order.
type keyRow []any

var keyColumns = []string{"tenant_id", "inquiry_id", "wrapped", "kek_id", "created_at"}

// companion is the row as an append on handle inserts it.
func (r keyRow) companion(handle any) *eventstore.Companion {
	return &eventstore.Companion{Handle: handle, Table: "inquiry_keys", Columns: keyColumns,
		Values: func(string) []any { return r }, Taken: errKeyTaken}
}

// create inserts a fresh wrapped key unless the inquiry has a row, then returns the stored key.
func (k *Keys) create(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*DataKey, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	kek, err := k.kek(k.current, tenant)
	if err != nil {
		return nil, err
	}
	wrapped := kek.Seal(raw, aadOf(tenant, id))
	var stored []byte
	var kekID string
	// Two first appends may race: the first insert wins and both use its key.
	err = sqldb.Group(ctx, k.db, func(ctx context.Context, tx *sqldb.Tx) error {
		err := tx.QueryRowContext(ctx, k.db.Rebind(`INSERT INTO inquiry_keys (tenant_id, inquiry_id, wrapped, kek_id, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, inquiry_id) DO NOTHING RETURNING wrapped, kek_id`),
			string(tenant), string(id), wrapped, k.current, k.now().UnixNano()).Scan(&stored, &kekID)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return tx.QueryRowContext(ctx, k.db.Rebind(`SELECT wrapped, kek_id FROM inquiry_keys WHERE tenant_id = ? AND inquiry_id = ?`),
			string(tenant), string(id)).Scan(&stored, &kekID)
	})
	if err != nil {
		return nil, fmt.Errorf("sealed: create key: %w", err)
	}
	return k.unwrap(ident{tenant, id}, stored, kekID)
}

// Destroy shreds the inquiry's data key: the wrapped key is overwritten (SQLite's secure_delete
// zeroes the old bytes; Postgres keeps no readable copy once vacuumed) and a tombstone row stays so
// no new key is ever created for the inquiry. Destroying twice is harmless.
func (k *Keys) Destroy(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error {
	k.mu.Lock()
	delete(k.cache, ident{tenant, id})
	k.mu.Unlock()
	now := k.now().UnixNano()
	err := sqldb.Group(ctx, k.db, func(ctx context.Context, tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, k.db.Rebind(`INSERT INTO inquiry_keys (tenant_id, inquiry_id, wrapped, kek_id, created_at, erased_at)
			VALUES (?, ?, NULL, '', ?, ?) ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET wrapped = NULL, kek_id = '',
			erased_at = COALESCE(inquiry_keys.erased_at, excluded.erased_at)`), string(tenant), string(id), now, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("sealed: destroy key: %w", err)
	}
	return nil
}

// Rewrap wraps every live data key under the current master key and reports how many it changed.
// After it, older masters can be removed from the configuration.
func (k *Keys) Rewrap(ctx context.Context) (int, error) {
	type row struct {
		tenant, id, kekID string
		wrapped           []byte
	}
	rows, err := func() ([]row, error) {
		rs, err := k.db.QueryContext(ctx, k.db.Rebind(`SELECT tenant_id, inquiry_id, kek_id, wrapped FROM inquiry_keys
			WHERE wrapped IS NOT NULL AND kek_id <> ?`), k.current)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var out []row
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.tenant, &r.id, &r.kekID, &r.wrapped); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rs.Err()
	}()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		t, id := domain.TenantID(r.tenant), domain.InquiryID(r.id)
		old, err := k.kek(r.kekID, t)
		if err != nil {
			return n, err
		}
		raw, err := old.Open(r.wrapped, aadOf(t, id))
		if err != nil {
			return n, fmt.Errorf("sealed: unwrap the data key of %s: %w", id, err)
		}
		cur, err := k.kek(k.current, t)
		if err != nil {
			return n, err
		}
		if err := sqldb.InTx(ctx, k.db, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, k.db.Rebind(`UPDATE inquiry_keys SET wrapped = ?, kek_id = ?
				WHERE tenant_id = ? AND inquiry_id = ? AND kek_id = ? AND wrapped IS NOT NULL`),
				cur.Seal(raw, aadOf(t, id)), k.current, r.tenant, r.id, r.kekID)
			return err
		}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// BlindIndex returns the blind index of a normalized value (a requester's email address) in
// tenant: hex HMAC-SHA256 under a key derived from the current master key for the tenant, so
// it is stored nowhere, and the same value in another tenant indexes differently.
func (k *Keys) BlindIndex(tenant domain.TenantID, value string) string {
	return k.blindIndex(k.current, tenant, value)
}

// BlindIndexes returns value's blind index under every configured master key, the current one
// first: a lookup matches entries written before a rotation too.
func (k *Keys) BlindIndexes(tenant domain.TenantID, value string) []string {
	out := make([]string, 0, len(k.order))
	for _, id := range k.order {
		out = append(out, k.blindIndex(id, tenant, value))
	}
	return out
}

func (k *Keys) blindIndex(kekID string, tenant domain.TenantID, value string) string {
	tk, err := k.tenantKeys(kekID, tenant)
	if err != nil {
		panic(err) // kekID is a configured master, and HKDF-SHA256 of a 32-byte key cannot fail
	}
	m := hmac.New(sha256.New, tk.blind)
	m.Write([]byte(value))
	return hex.EncodeToString(m.Sum(nil))
}

// Current returns the id of the master key that wraps new data keys.
func (k *Keys) Current() string { return k.current }

// ErrUnknownMaster: live data keys are wrapped by a master key the configuration does not hold.
// Nothing is shredded; the process must be given that master (as current or previous key).
var ErrUnknownMaster = errors.New("sealed: data keys are wrapped by a master key that is not configured")

// WrappedBy counts the live data keys per master key id (destroyed keys are not counted).
func (k *Keys) WrappedBy(ctx context.Context) (map[string]int, error) {
	rows, err := k.db.QueryContext(ctx, `SELECT kek_id, count(*) FROM inquiry_keys WHERE wrapped IS NOT NULL GROUP BY kek_id`)
	if err != nil {
		return nil, fmt.Errorf("sealed: count keys: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// Check fails with ErrUnknownMaster, naming the missing master key ids, when a live data key is
// wrapped by a master the configuration lacks: opening with a wrong master key file is refused
// at start rather than reading every inquiry as unreadable.
func (k *Keys) Check(ctx context.Context) error {
	counts, err := k.WrappedBy(ctx)
	if err != nil {
		return err
	}
	var missing []string
	for id, n := range counts {
		if _, ok := k.masters[id]; !ok {
			missing = append(missing, fmt.Sprintf("%s (%d keys)", id, n))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%w: %s; configured: %s", ErrUnknownMaster, strings.Join(missing, ", "), strings.Join(k.order, ", "))
	}
	return nil
}
