package slackproj

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/casebook/casebook/domain"
)

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// gate returns how long a job for d must wait: a shared 429 cooldown, or an open circuit until its
// next probe. When a probe is due, one caller claims it (compare-and-swap) and may proceed.
func (s *Store) gate(ctx context.Context, d Destination, probeEvery time.Duration) (time.Duration, error) {
	var cooldown, probeAt int64
	var open int
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT cooldown_until, circuit_open, next_probe_at FROM slack_destination_health
		WHERE tenant_id = ? AND channel_key = ?`), d.Tenant, d.channelKey()).Scan(&cooldown, &open, &probeAt)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := s.Now().UnixNano()
	if open == 1 {
		if now < probeAt {
			return time.Duration(probeAt - now), nil
		}
		res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_destination_health SET next_probe_at = ?
			WHERE tenant_id = ? AND channel_key = ? AND next_probe_at = ?`), now+int64(probeEvery), d.Tenant, d.channelKey(), probeAt)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return probeEvery, nil // another job is probing
		}
	}
	if now < cooldown {
		return time.Duration(cooldown - now), nil
	}
	return 0, nil
}

func (s *Store) upsertHealth(ctx context.Context, d Destination, set string, args ...any) error {
	if _, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_destination_health (tenant_id, channel_key) VALUES (?, ?)
		ON CONFLICT (tenant_id, channel_key) DO NOTHING`), d.Tenant, d.channelKey()); err != nil {
		return err
	}
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_destination_health SET `+set+` WHERE tenant_id = ? AND channel_key = ?`),
		append(args, d.Tenant, d.channelKey())...)
	return err
}

// setCooldown makes every job for d wait until until (never shortening a longer cooldown).
func (s *Store) setCooldown(ctx context.Context, d Destination, until time.Time) error {
	return s.upsertHealth(ctx, d, `cooldown_until = CASE WHEN cooldown_until > ? THEN cooldown_until ELSE ? END`, until.UnixNano(), until.UnixNano())
}

func (s *Store) openCircuit(ctx context.Context, d Destination, reason string, probeEvery time.Duration) error {
	now := s.Now()
	return s.upsertHealth(ctx, d, `circuit_open = 1, circuit_reason = ?, opened_at = CASE WHEN circuit_open = 1 THEN opened_at ELSE ? END, next_probe_at = ?`,
		reason, now.UnixNano(), now.Add(probeEvery).UnixNano())
}

func (s *Store) closeCircuitAfterSuccess(ctx context.Context, d Destination) error {
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_destination_health SET circuit_open = 0, circuit_reason = ''
		WHERE tenant_id = ? AND channel_key = ? AND circuit_open = 1`), d.Tenant, d.channelKey())
	return err
}

// Circuit is a destination's breaker as operators see it.
type Circuit struct {
	Channel       string    `json:"channel"`
	Installation  string    `json:"installation"`
	Open          bool      `json:"open"`
	Reason        string    `json:"reason,omitempty"`
	OpenedAt      time.Time `json:"opened_at,omitzero"`
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
}

// Circuits lists a tenant's destination health.
func (s *Store) Circuits(ctx context.Context, tenant domain.TenantID) ([]Circuit, error) {
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT channel_key, circuit_open, circuit_reason, opened_at, cooldown_until
		FROM slack_destination_health WHERE tenant_id = ? ORDER BY channel_key`), tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Circuit{}
	for rows.Next() {
		var key string
		var open int
		var opened, cool int64
		var c Circuit
		if err := rows.Scan(&key, &open, &c.Reason, &opened, &cool); err != nil {
			return nil, err
		}
		for i := len(key) - 1; i >= 0; i-- {
			if key[i] == '#' {
				c.Installation, c.Channel = key[:i], key[i+1:]
				break
			}
		}
		c.Open = open == 1
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

// CloseCircuit closes a tenant's circuits on channel (an operator's decision). It reports how many
// were open; none is domain.ErrNotFound.
func (s *Store) CloseCircuit(ctx context.Context, tenant domain.TenantID, channel string) (int, error) {
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_destination_health SET circuit_open = 0, circuit_reason = '', next_probe_at = 0
		WHERE tenant_id = ? AND channel_key LIKE ? AND circuit_open = 1`), tenant, "%#"+channel)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, domain.ErrNotFound
	}
	return int(n), nil
}

// claimAttempt records that a non-idempotent write for key is about to happen. It returns
// fresh=true when no attempt was recorded; when one exists it is re-claimed (and reconcile=true)
// only if older than stale, so a write still in flight elsewhere is never raced.
func (s *Store) claimAttempt(ctx context.Context, key string, stale time.Duration) (fresh, reconcile bool, err error) {
	now := s.Now().UnixNano()
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_effect_attempts (effect_key, created_at) VALUES (?, ?)
		ON CONFLICT (effect_key) DO NOTHING`), key, now)
	if err != nil {
		return false, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, false, nil
	}
	res, err = s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_effect_attempts SET created_at = ? WHERE effect_key = ? AND created_at <= ?`),
		now, key, now-int64(stale))
	if err != nil {
		return false, false, err
	}
	n, _ := res.RowsAffected()
	return false, n == 1, nil
}

// releaseAttempt forgets an attempt that certainly did not reach Slack.
func (s *Store) releaseAttempt(ctx context.Context, key string) error {
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(`DELETE FROM slack_effect_attempts WHERE effect_key = ?`), key)
	return err
}

func (s *Store) recordSuccess(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error {
	now := s.Now().UnixNano()
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_sync_health (tenant_id, inquiry_id, last_success) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET last_success = excluded.last_success, last_error = '', error_class = ''`), tenant, id, now)
	return err
}

func (s *Store) recordError(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, class, msg string) error {
	now := s.Now().UnixNano()
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_sync_health (tenant_id, inquiry_id, last_error, error_class, last_error_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET last_error = excluded.last_error, error_class = excluded.error_class,
		last_error_at = excluded.last_error_at`), tenant, id, msg, class, now)
	return err
}

// Health is an inquiry's Slack projection state: "saved; Slack pending/failed".
type Health struct {
	State           string     `json:"state"` // pending, synced, failed or disabled
	DesiredVersion  uint64     `json:"desired_version"`
	ObservedVersion uint64     `json:"observed_version"`
	Channel         string     `json:"channel,omitempty"`
	LastSuccess     *time.Time `json:"last_success,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	ErrorClass      string     `json:"error_class,omitempty"`
}

// Health reads an inquiry's Slack state. Versions come from the slackintents projection (desired
// from the inquiry stream, observed from slackproj events); errors from the worker.
func (s *Store) Health(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (Health, error) {
	var h Health
	var desired, observed sql.NullInt64
	var channel sql.NullString
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT desired_version, observed_version, channel_id FROM slack_threads
		WHERE tenant_id = ? AND inquiry_id = ?`), tenant, id).Scan(&desired, &observed, &channel)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return h, err
	}
	h.DesiredVersion, h.ObservedVersion, h.Channel = uint64(desired.Int64), uint64(observed.Int64), channel.String
	var succ, errAt int64
	err = s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT last_success, last_error, error_class, last_error_at FROM slack_sync_health
		WHERE tenant_id = ? AND inquiry_id = ?`), tenant, id).Scan(&succ, &h.LastError, &h.ErrorClass, &errAt)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return h, err
	}
	if succ > 0 {
		t := time.Unix(0, succ).UTC()
		h.LastSuccess = &t
	}
	has, err := s.HasDestination(ctx, s.DB, tenant)
	if err != nil {
		return h, err
	}
	switch {
	case h.DesiredVersion > 0 && h.ObservedVersion >= h.DesiredVersion:
		h.State = "synced"
	case !has && h.ObservedVersion == 0:
		h.State = "disabled"
	case h.LastError != "":
		h.State = "failed"
	default:
		h.State = "pending"
	}
	return h, nil
}
