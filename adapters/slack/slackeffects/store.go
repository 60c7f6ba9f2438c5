package slackeffects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// The tables keep the names they had before this package existed, so an upgraded database keeps
// its open circuits, cooldowns and create attempts. slack_effect_health replaces the thread-only
// slack_sync_health and the List-only slack_list_sync_health (health is rebuilt by the next run
// of each target).
var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_destination_health (
	tenant_id      TEXT   NOT NULL,
	channel_key    TEXT   NOT NULL,
	cooldown_until BIGINT NOT NULL DEFAULT 0,
	circuit_open   INTEGER NOT NULL DEFAULT 0,
	circuit_reason TEXT   NOT NULL DEFAULT '',
	opened_at      BIGINT NOT NULL DEFAULT 0,
	next_probe_at  BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant_id, channel_key)
);
CREATE TABLE IF NOT EXISTS slack_effect_attempts (
	effect_key TEXT   PRIMARY KEY,
	created_at BIGINT NOT NULL
)`}, {Version: 2, SQL: `
ALTER TABLE slack_destination_health ADD COLUMN circuit_manual INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS slack_effect_health (
	tenant_id     TEXT   NOT NULL,
	inquiry_id    TEXT   NOT NULL,
	kind          TEXT   NOT NULL,
	installation  TEXT   NOT NULL,
	destination   TEXT   NOT NULL,
	last_success  BIGINT NOT NULL DEFAULT 0,
	last_error    TEXT   NOT NULL DEFAULT '',
	error_class   TEXT   NOT NULL DEFAULT '',
	last_error_at BIGINT NOT NULL DEFAULT 0,
	updated_at    BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant_id, inquiry_id, kind, installation, destination)
);
CREATE INDEX IF NOT EXISTS slack_effect_health_dest ON slack_effect_health (tenant_id, destination, kind)`}, {Version: 3, SQL: `
ALTER TABLE slack_effect_attempts ADD COLUMN window_from BIGINT NOT NULL DEFAULT 0;
ALTER TABLE slack_effect_attempts ADD COLUMN window_to BIGINT NOT NULL DEFAULT 0`}}

// Migrate creates the runtime's tables (River's are MigrateRiver's).
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "slackeffects", migrations)
}

// Ledger records writes that are not idempotent before they are sent, keyed by effect key.
type Ledger struct {
	DB  *sqldb.DB
	Now func() time.Time
}

// Claim records that a write for key is about to happen. It returns fresh=true when no attempt was
// recorded; when one exists it is re-claimed (reconcile=true: look the effect up before writing)
// only if older than stale, so a write still in flight elsewhere is never raced.
//
// Re-claiming also keeps the lookup window (Window): the span of our clock in which an earlier
// attempt whose outcome is unknown may have landed. It opens at that attempt's start and closes
// stale later (no call outlives stale). A window a lookup has not finished reading (Narrow,
// Cleared) is kept as it is, so a lookup cut short by a rate limit resumes where it stopped.
func (l *Ledger) Claim(ctx context.Context, key string, stale time.Duration) (fresh, reconcile bool, err error) {
	now := l.Now().UnixNano()
	res, err := l.DB.ExecContext(ctx, l.DB.Rebind(`INSERT INTO slack_effect_attempts (effect_key, created_at) VALUES (?, ?)
		ON CONFLICT (effect_key) DO NOTHING`), key, now)
	if err != nil {
		return false, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, false, nil
	}
	res, err = l.DB.ExecContext(ctx, l.DB.Rebind(`UPDATE slack_effect_attempts SET
		window_from = CASE WHEN window_from = 0 THEN created_at ELSE window_from END,
		window_to = CASE WHEN window_from = 0 THEN created_at + ? ELSE window_to END,
		created_at = ?
		WHERE effect_key = ? AND created_at <= ?`),
		int64(stale), now, key, now-int64(stale))
	if err != nil {
		return false, false, err
	}
	n, _ := res.RowsAffected()
	return false, n == 1, nil
}

// Attempted reports whether a write for key was claimed and not released: it may have reached
// Slack.
func (l *Ledger) Attempted(ctx context.Context, key string) (bool, error) {
	var n int
	err := l.DB.QueryRowContext(ctx, l.DB.Rebind(`SELECT count(*) FROM slack_effect_attempts WHERE effect_key = ?`), key).Scan(&n)
	return n > 0, err
}

// Window returns the span (our clock) in which an earlier attempt of key may have posted, zero
// times when there is none to look for.
func (l *Ledger) Window(ctx context.Context, key string) (from, to time.Time, err error) {
	var f, t int64
	err = l.DB.QueryRowContext(ctx, l.DB.Rebind(`SELECT window_from, window_to FROM slack_effect_attempts WHERE effect_key = ?`), key).Scan(&f, &t)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && f == 0) {
		return time.Time{}, time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	return time.Unix(0, f).UTC(), time.Unix(0, t).UTC(), nil
}

// Narrow records that the part of key's window after to has been read and holds no message of
// key, so the next lookup starts below it.
func (l *Ledger) Narrow(ctx context.Context, key string, to time.Time) error {
	_, err := l.DB.ExecContext(ctx, l.DB.Rebind(`UPDATE slack_effect_attempts SET window_to = ? WHERE effect_key = ? AND window_from <> 0 AND window_to > ?`),
		to.UnixNano(), key, to.UnixNano())
	return err
}

// NarrowFrom records that the part of key's window before from has been read and holds no
// message of key (a lookup that reads oldest first).
func (l *Ledger) NarrowFrom(ctx context.Context, key string, from time.Time) error {
	_, err := l.DB.ExecContext(ctx, l.DB.Rebind(`UPDATE slack_effect_attempts SET window_from = ? WHERE effect_key = ? AND window_from <> 0 AND window_from < ?`),
		from.UnixNano(), key, from.UnixNano())
	return err
}

// Cleared records that key's whole window was read and holds no message of key: the earlier
// attempts did not post, and only the attempt about to be made needs looking for next time.
func (l *Ledger) Cleared(ctx context.Context, key string) error {
	_, err := l.DB.ExecContext(ctx, l.DB.Rebind(`UPDATE slack_effect_attempts SET window_from = 0, window_to = 0 WHERE effect_key = ?`), key)
	return err
}

// Release forgets an attempt whose call certainly did not reach Slack (CertainlyNotApplied).
func (l *Ledger) Release(ctx context.Context, key string) error {
	_, err := l.DB.ExecContext(context.WithoutCancel(ctx), l.DB.Rebind(`DELETE FROM slack_effect_attempts WHERE effect_key = ?`), key)
	return err
}

// Guard holds back writes to a destination while its shared cooldown or its circuit holds, and
// every write of an installation while the installation's circuit is open (uninstall, revoked
// token).
type Guard struct {
	DB  *sqldb.DB
	Now func() time.Time
}

// admit returns how long a job for t must wait. When an open circuit's probe is due, one caller
// claims it (compare-and-swap) and may proceed; a manual circuit waits for an operator.
func (g *Guard) admit(ctx context.Context, t Target, probeEvery time.Duration, frees bool) (time.Duration, error) {
	hs, err := g.rows(ctx, t)
	if err != nil {
		return 0, err
	}
	now := g.Now().UnixNano()
	var wait time.Duration
	for _, r := range hs {
		if now < r.cooldown {
			wait = max(wait, time.Duration(r.cooldown-now))
		}
		switch {
		case r.open == 0:
		case frees && codes[r.reason] == ClassCapacity:
			// A removal frees room: a full destination never holds it back.
		case r.manual == 1:
			wait = max(wait, probeEvery)
		case now < r.probeAt:
			wait = max(wait, time.Duration(r.probeAt-now))
		default:
			res, err := g.DB.ExecContext(ctx, g.DB.Rebind(`UPDATE slack_destination_health SET next_probe_at = ?
				WHERE tenant_id = ? AND channel_key = ? AND next_probe_at = ?`), now+int64(probeEvery), t.Tenant, r.key, r.probeAt)
			if err != nil {
				return 0, err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				wait = max(wait, probeEvery) // another job is probing
			}
		}
	}
	return wait, nil
}

type healthRow struct {
	key, reason       string
	cooldown, probeAt int64
	open, manual      int
}

// rows reads the destination's and the installation's health rows of t.
func (g *Guard) rows(ctx context.Context, t Target) ([]healthRow, error) {
	rows, err := g.DB.QueryContext(ctx, g.DB.Rebind(`SELECT channel_key, cooldown_until, circuit_open, circuit_manual, next_probe_at, circuit_reason
		FROM slack_destination_health WHERE tenant_id = ? AND channel_key IN (?, ?) ORDER BY channel_key`), t.Tenant, t.scope(), installationScope(t.Installation))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []healthRow
	for rows.Next() {
		var r healthRow
		if err := rows.Scan(&r.key, &r.cooldown, &r.open, &r.manual, &r.probeAt, &r.reason); err != nil {
			return nil, err
		}
		hs = append(hs, r)
	}
	return hs, rows.Err()
}

func (g *Guard) upsert(ctx context.Context, tenant domain.TenantID, scope, set string, args ...any) error {
	if _, err := g.DB.ExecContext(ctx, g.DB.Rebind(`INSERT INTO slack_destination_health (tenant_id, channel_key) VALUES (?, ?)
		ON CONFLICT (tenant_id, channel_key) DO NOTHING`), tenant, scope); err != nil {
		return err
	}
	_, err := g.DB.ExecContext(ctx, g.DB.Rebind(`UPDATE slack_destination_health SET `+set+` WHERE tenant_id = ? AND channel_key = ?`),
		append(args, tenant, scope)...)
	return err
}

// cooldown makes every job for t's destination wait until until (never shortening a longer one).
func (g *Guard) cooldown(ctx context.Context, t Target, until time.Time) error {
	return g.upsert(ctx, t.Tenant, t.scope(), `cooldown_until = CASE WHEN cooldown_until > ? THEN cooldown_until ELSE ? END`, until.UnixNano(), until.UnixNano())
}

func (g *Guard) open(ctx context.Context, tenant domain.TenantID, scope, reason string, manual bool, probeEvery time.Duration) error {
	now := g.Now()
	m := 0
	if manual {
		m = 1
	}
	return g.upsert(ctx, tenant, scope, `circuit_open = 1, circuit_manual = ?, circuit_reason = ?,
		opened_at = CASE WHEN circuit_open = 1 THEN opened_at ELSE ? END, next_probe_at = ?`,
		m, reason, now.UnixNano(), now.Add(probeEvery).UnixNano())
}

// succeeded closes t's destination and installation circuits unless an operator must close them.
func (g *Guard) succeeded(ctx context.Context, t Target) error {
	_, err := g.DB.ExecContext(ctx, g.DB.Rebind(`UPDATE slack_destination_health SET circuit_open = 0, circuit_reason = ''
		WHERE tenant_id = ? AND channel_key IN (?, ?) AND circuit_open = 1 AND circuit_manual = 0`), t.Tenant, t.scope(), installationScope(t.Installation))
	return err
}

// ProbeAfterUninstall is when a disabled installation's circuit first lets a probe through.
const ProbeAfterUninstall = 5 * time.Minute

// DisableInstallation opens the installation-wide circuit of the tenant's installation key
// (app_uninstalled, tokens_revoked): every effect kind of the installation stops. A probe after
// ProbeAfterUninstall (it succeeds only with a valid token, e.g. after a reinstall) or
// `casebook effects circuit-close --channel '*'` closes it. Idempotent.
func (g *Guard) DisableInstallation(ctx context.Context, tenant domain.TenantID, key, reason string) error {
	return g.open(ctx, tenant, installationScope(key), reason, false, ProbeAfterUninstall)
}

// Circuit is a destination's (or an installation's, Channel "*") breaker as operators see it.
type Circuit struct {
	Channel       string    `json:"channel"`
	Installation  string    `json:"installation"`
	Open          bool      `json:"open"`
	Manual        bool      `json:"manual,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	OpenedAt      time.Time `json:"opened_at,omitzero"`
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
}

// Circuits lists a tenant's destination health.
func (g *Guard) Circuits(ctx context.Context, tenant domain.TenantID) ([]Circuit, error) {
	rows, err := g.DB.QueryContext(ctx, g.DB.Rebind(`SELECT channel_key, circuit_open, circuit_manual, circuit_reason, opened_at, cooldown_until
		FROM slack_destination_health WHERE tenant_id = ? ORDER BY channel_key`), tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Circuit{}
	for rows.Next() {
		var key string
		var open, manual int
		var opened, cool int64
		var c Circuit
		if err := rows.Scan(&key, &open, &manual, &c.Reason, &opened, &cool); err != nil {
			return nil, err
		}
		for i := len(key) - 1; i >= 0; i-- {
			if key[i] == '#' {
				c.Installation, c.Channel = key[:i], key[i+1:]
				break
			}
		}
		c.Open, c.Manual = open == 1, manual == 1
		if opened > 0 && c.Open {
			c.OpenedAt = time.Unix(0, opened).UTC()
		}
		if cool > 0 {
			c.CooldownUntil = time.Unix(0, cool).UTC()
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Circuit returns the breaker of one destination (channel or List id) of the tenant; a
// destination never written to is closed.
func (g *Guard) Circuit(ctx context.Context, tenant domain.TenantID, destination string) (Circuit, error) {
	cs, err := g.Circuits(ctx, tenant)
	if err != nil {
		return Circuit{}, err
	}
	out := Circuit{Channel: destination}
	for _, c := range cs {
		if c.Channel == destination {
			if c.Open || out.CooldownUntil.Before(c.CooldownUntil) {
				out = c
			}
		}
	}
	return out, nil
}

// CloseCircuit closes a tenant's circuits on a destination (channel or List id; "*" for the
// installation-wide ones): an operator's decision. It reports how many were open; none is
// domain.ErrNotFound.
func (g *Guard) CloseCircuit(ctx context.Context, tenant domain.TenantID, destination string) (int, error) {
	res, err := g.DB.ExecContext(ctx, g.DB.Rebind(`UPDATE slack_destination_health SET circuit_open = 0, circuit_manual = 0, circuit_reason = '', next_probe_at = 0
		WHERE tenant_id = ? AND channel_key LIKE ? AND circuit_open = 1`), tenant, "%#"+destination)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, fmt.Errorf("open circuit: %w", domain.ErrNotFound)
	}
	return int(n), nil
}

// Health is one target's last outcome.
type Health struct {
	Target      Target
	LastSuccess time.Time
	LastError   string
	ErrorClass  Class
	LastErrorAt time.Time
	UpdatedAt   time.Time
}

// healthLog records targets' outcomes.
type healthLog struct {
	DB  *sqldb.DB
	Now func() time.Time
}

func (h *healthLog) success(ctx context.Context, t Target) error {
	now := h.Now().UnixNano()
	_, err := h.DB.ExecContext(ctx, h.DB.Rebind(`INSERT INTO slack_effect_health (tenant_id, inquiry_id, kind, installation, destination, last_success, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, inquiry_id, kind, installation, destination) DO UPDATE SET
		last_success = excluded.last_success, last_error = '', error_class = '', updated_at = excluded.updated_at`),
		t.Tenant, t.Inquiry, t.Kind, t.Installation, t.Destination, now, now)
	return err
}

func (h *healthLog) failure(ctx context.Context, t Target, class Class, msg string) error {
	now := h.Now().UnixNano()
	_, err := h.DB.ExecContext(ctx, h.DB.Rebind(`INSERT INTO slack_effect_health (tenant_id, inquiry_id, kind, installation, destination,
		last_error, error_class, last_error_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, inquiry_id, kind, installation, destination) DO UPDATE SET last_error = excluded.last_error,
		error_class = excluded.error_class, last_error_at = excluded.last_error_at, updated_at = excluded.updated_at`),
		t.Tenant, t.Inquiry, t.Kind, t.Installation, t.Destination, msg, class, now, now)
	return err
}

// HealthOf returns an inquiry's target health rows of the given kinds (every kind when none),
// newest first.
func (h *healthLog) of(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, kinds []string) ([]Health, error) {
	q := `SELECT kind, installation, destination, last_success, last_error, error_class, last_error_at, updated_at
		FROM slack_effect_health WHERE tenant_id = ? AND inquiry_id = ?`
	args := []any{tenant, inquiry}
	if len(kinds) > 0 {
		q += ` AND kind IN (?` + strings.Repeat(", ?", len(kinds)-1) + `)`
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	rows, err := h.DB.QueryContext(ctx, h.DB.Rebind(q+` ORDER BY updated_at DESC, kind, destination`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Health
	for rows.Next() {
		r := Health{Target: Target{Tenant: tenant, Inquiry: inquiry}}
		var succ, errAt, upd int64
		if err := rows.Scan(&r.Target.Kind, &r.Target.Installation, &r.Target.Destination, &succ, &r.LastError, &r.ErrorClass, &errAt, &upd); err != nil {
			return nil, err
		}
		r.LastSuccess, r.LastErrorAt, r.UpdatedAt = unixTime(succ), unixTime(errAt), unixTime(upd)
		out = append(out, r)
	}
	return out, rows.Err()
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// DestinationHealth counts a destination's targets of the given kinds by their last outcome: the
// empty class is a success.
func (r *Runtime) DestinationHealth(ctx context.Context, tenant domain.TenantID, destination string, kinds ...string) (map[Class]int, error) {
	q := `SELECT error_class, count(*) FROM slack_effect_health WHERE tenant_id = ? AND destination = ?`
	args := []any{tenant, destination}
	if len(kinds) > 0 {
		q += ` AND kind IN (?` + strings.Repeat(", ?", len(kinds)-1) + `)`
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(q+` GROUP BY error_class`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[Class]int{}
	for rows.Next() {
		var c Class
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			return nil, err
		}
		out[c] = n
	}
	return out, rows.Err()
}

// SetCooldown makes every job of a destination of the installation with key wait until until
// (never shortening a longer cooldown): what a 429 does, for operators and tests.
func (g *Guard) SetCooldown(ctx context.Context, tenant domain.TenantID, key, destination string, until time.Time) error {
	return g.cooldown(ctx, Target{Tenant: tenant, Installation: key, Destination: destination}, until)
}
