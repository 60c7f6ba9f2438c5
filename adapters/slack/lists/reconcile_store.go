package lists

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// reconcileDDL adds the reconciler's tables: per List one run lease (owner, expiry, fence) and the
// watermarks; the tombstones of mapped rows a complete scan did not find; the rows quarantined
// once (so each gets one event); and the working-set bound of each projection.
const reconcileDDL = `
CREATE TABLE IF NOT EXISTS slack_list_reconcile (
	tenant_id      TEXT   NOT NULL,
	list_id        TEXT   NOT NULL,
	lease_owner    TEXT   NOT NULL DEFAULT '',
	lease_until    BIGINT NOT NULL DEFAULT 0,
	fence          BIGINT NOT NULL DEFAULT 0,
	last_attempted BIGINT NOT NULL DEFAULT 0,
	last_observed  BIGINT NOT NULL DEFAULT 0,
	last_applied   BIGINT NOT NULL DEFAULT 0,
	backlog_since  BIGINT NOT NULL DEFAULT 0,
	last_run       TEXT   NOT NULL DEFAULT '',
	PRIMARY KEY (tenant_id, list_id)
);
CREATE TABLE IF NOT EXISTS slack_list_tombstones (
	tenant_id        TEXT   NOT NULL,
	list_id          TEXT   NOT NULL,
	inquiry_id       TEXT   NOT NULL,
	row_id           TEXT   NOT NULL,
	first_missing_at BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, list_id, inquiry_id)
);
CREATE TABLE IF NOT EXISTS slack_list_quarantine (
	tenant_id  TEXT   NOT NULL,
	list_id    TEXT   NOT NULL,
	row_id     TEXT   NOT NULL,
	reason     TEXT   NOT NULL,
	first_seen BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, list_id, row_id)
);
CREATE TABLE IF NOT EXISTS slack_list_evicted (
	tenant_id  TEXT   NOT NULL,
	list_id    TEXT   NOT NULL,
	inquiry_id TEXT   NOT NULL,
	PRIMARY KEY (tenant_id, list_id, inquiry_id)
);
ALTER TABLE slack_list_projections ADD COLUMN working_set_max BIGINT NOT NULL DEFAULT 0`

// ErrReconcileBusy: another reconciler holds the List's run lease; this one did nothing.
var ErrReconcileBusy = fmt.Errorf("another reconcile of this List is running: %w", domain.ErrConflict)

// lease is one held run lease; every write of the run is conditional on its fence.
type lease struct {
	tenant domain.TenantID
	list   string
	fence  int64
}

// acquire takes the List's run lease for ttl, or returns ErrReconcileBusy while another holder's
// lease has not expired. Each acquisition raises the fence, so a holder whose lease expired and
// was taken over can no longer write.
func (s *Store) acquire(ctx context.Context, tenant domain.TenantID, list, owner string, ttl time.Duration) (*lease, error) {
	if err := s.exec(ctx, `INSERT INTO slack_list_reconcile (tenant_id, list_id) VALUES (?, ?) ON CONFLICT (tenant_id, list_id) DO NOTHING`, tenant, list); err != nil {
		return nil, err
	}
	now := s.Now().UnixNano()
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_list_reconcile SET lease_owner = ?, lease_until = ?, fence = fence + 1
		WHERE tenant_id = ? AND list_id = ? AND lease_until <= ?`), owner, now+int64(ttl), tenant, list, now)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, ErrReconcileBusy
	}
	l := &lease{tenant: tenant, list: list}
	err = s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT fence FROM slack_list_reconcile WHERE tenant_id = ? AND list_id = ? AND lease_owner = ?`),
		tenant, list, owner).Scan(&l.fence)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrReconcileBusy
	}
	return l, err
}

// errLeaseLost: the run's lease expired and another run took it; the run stops writing.
var errLeaseLost = errors.New("lease lost")

// extend renews the lease for ttl; errLeaseLost when another run has fenced it off.
func (s *Store) extend(ctx context.Context, l *lease, ttl time.Duration) error {
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_list_reconcile SET lease_until = ? WHERE tenant_id = ? AND list_id = ? AND fence = ?`),
		s.Now().UnixNano()+int64(ttl), l.tenant, l.list, l.fence)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errLeaseLost
	}
	return nil
}

func (s *Store) release(ctx context.Context, l *lease) error {
	return s.exec(context.WithoutCancel(ctx), `UPDATE slack_list_reconcile SET lease_owner = '', lease_until = 0 WHERE tenant_id = ? AND list_id = ? AND fence = ?`,
		l.tenant, l.list, l.fence)
}

func (s *Store) markAttempted(ctx context.Context, l *lease, at time.Time) error {
	return s.exec(ctx, `UPDATE slack_list_reconcile SET last_attempted = ? WHERE tenant_id = ? AND list_id = ? AND fence = ?`,
		at.UnixNano(), l.tenant, l.list, l.fence)
}

// finish records a run's watermarks: a complete scan moves last_successfully_observed; a complete
// scan whose every action applied moves last_fully_applied and ends the backlog; any other run
// leaves both and starts the backlog if none is running.
func (s *Store) finish(ctx context.Context, l *lease, r Report) error {
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	now := r.FinishedAt.UnixNano()
	q := `UPDATE slack_list_reconcile SET last_run = ?`
	args := []any{string(js)}
	switch {
	case r.Complete && r.FullyApplied:
		q += `, last_observed = ?, last_applied = ?, backlog_since = 0`
		args = append(args, now, now)
	case r.Complete:
		q += `, last_observed = ?, backlog_since = CASE WHEN backlog_since = 0 THEN ? ELSE backlog_since END`
		args = append(args, now, r.StartedAt.UnixNano())
	default:
		q += `, backlog_since = CASE WHEN backlog_since = 0 THEN ? ELSE backlog_since END`
		args = append(args, r.StartedAt.UnixNano())
	}
	args = append(args, l.tenant, l.list, l.fence)
	return s.exec(context.WithoutCancel(ctx), q+` WHERE tenant_id = ? AND list_id = ? AND fence = ?`, args...)
}

// Watermarks are a List's reconcile marks. An incomplete run moves only LastAttempted.
type Watermarks struct {
	LastAttempted            *time.Time `json:"last_attempted,omitempty"`
	LastSuccessfullyObserved *time.Time `json:"last_successfully_observed,omitempty"`
	LastFullyApplied         *time.Time `json:"last_fully_applied,omitempty"`
	// BacklogSince is when the oldest run that left work undone (or unobserved) started;
	// BacklogAgeSeconds its age now. Both empty when the last complete run applied everything.
	BacklogSince      *time.Time `json:"backlog_since,omitempty"`
	BacklogAgeSeconds int64      `json:"backlog_age_seconds"`
	Running           bool       `json:"running"`
}

// Reconciliation is a List's watermarks and its last run's report (nil before the first run).
type Reconciliation struct {
	Watermarks Watermarks `json:"watermarks"`
	LastRun    *Report    `json:"last_run,omitempty"`
}

func tp(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// Reconciliation reads a List's watermarks and last run; the zero value before any run.
func (s *Store) Reconciliation(ctx context.Context, tenant domain.TenantID, list string) (Reconciliation, error) {
	var att, obs, app, back, until int64
	var last string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT last_attempted, last_observed, last_applied, backlog_since, lease_until, last_run
		FROM slack_list_reconcile WHERE tenant_id = ? AND list_id = ?`), tenant, list).Scan(&att, &obs, &app, &back, &until, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return Reconciliation{}, nil
	}
	if err != nil {
		return Reconciliation{}, err
	}
	now := s.Now()
	out := Reconciliation{Watermarks: Watermarks{LastAttempted: tp(att), LastSuccessfullyObserved: tp(obs), LastFullyApplied: tp(app),
		BacklogSince: tp(back), Running: until > now.UnixNano()}}
	if back != 0 {
		out.Watermarks.BacklogAgeSeconds = int64(now.Sub(time.Unix(0, back)) / time.Second)
	}
	if last != "" {
		var r Report
		if err := json.Unmarshal([]byte(last), &r); err != nil {
			return Reconciliation{}, err
		}
		out.LastRun = &r
	}
	return out, nil
}

func (s *Store) setTombstone(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID, row string) error {
	return s.exec(ctx, `INSERT INTO slack_list_tombstones (tenant_id, list_id, inquiry_id, row_id, first_missing_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, list_id, inquiry_id) DO UPDATE SET row_id = excluded.row_id, first_missing_at = excluded.first_missing_at`,
		tenant, list, id, row, s.Now().UnixNano())
}

// setTombstoneOnce records a first absence the worker met (an update answered row gone) unless a
// tombstone for that row exists already; a complete scan confirms it.
func (s *Store) setTombstoneOnce(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID, row string) error {
	return s.exec(ctx, `INSERT INTO slack_list_tombstones (tenant_id, list_id, inquiry_id, row_id, first_missing_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, list_id, inquiry_id) DO NOTHING`, tenant, list, id, row, s.Now().UnixNano())
}

func (s *Store) clearTombstone(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID) error {
	return s.exec(ctx, `DELETE FROM slack_list_tombstones WHERE tenant_id = ? AND list_id = ? AND inquiry_id = ?`, tenant, list, id)
}

// quarantineOnce records row as quarantined; true the first time (the caller then writes its event).
func (s *Store) quarantineOnce(ctx context.Context, tenant domain.TenantID, list, row, reason string) (bool, error) {
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_list_quarantine (tenant_id, list_id, row_id, reason, first_seen) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, list_id, row_id) DO NOTHING`), tenant, list, row, reason, s.Now().UnixNano())
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// setEvicted replaces the List's evicted inquiries: the sync worker creates no row for them.
// Its transaction goes through sqldb.InTx: the SQLite writer gate, and a rollback on panic.
func (s *Store) setEvicted(ctx context.Context, tenant domain.TenantID, list string, ids []domain.InquiryID) error {
	return sqldb.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.DB.Rebind(`DELETE FROM slack_list_evicted WHERE tenant_id = ? AND list_id = ?`), tenant, list); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_list_evicted (tenant_id, list_id, inquiry_id) VALUES (?, ?, ?)`), tenant, list, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// evicted reports whether the last complete sweep evicted the inquiry from the List's working set.
func (s *Store) evicted(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID) (bool, error) {
	var n int
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT COUNT(*) FROM slack_list_evicted WHERE tenant_id = ? AND list_id = ? AND inquiry_id = ?`),
		tenant, list, id).Scan(&n)
	return n > 0, err
}

// SetWorkingSetMax sets a List's working-set bound (0: 90% of the plan's row cap read by the sweep).
func (s *Store) SetWorkingSetMax(ctx context.Context, tenant domain.TenantID, list string, n int) error {
	if n < 0 {
		return domain.Invalid("working_set_max", "must not be negative")
	}
	if _, err := s.Config(ctx, tenant, list); err != nil {
		return err
	}
	return s.exec(ctx, `UPDATE slack_list_projections SET working_set_max = ? WHERE tenant_id = ? AND list_id = ?`, n, tenant, list)
}

func (s *Store) workingSetMax(ctx context.Context, tenant domain.TenantID, list string) (int, error) {
	var n int
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT working_set_max FROM slack_list_projections WHERE tenant_id = ? AND list_id = ?`), tenant, list).Scan(&n)
	return n, err
}

// tombstones returns, per inquiry, the row a complete scan last found missing in list.
func (s *Store) tombstones(ctx context.Context, tenant domain.TenantID, list string) (map[domain.InquiryID]string, error) {
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT inquiry_id, row_id FROM slack_list_tombstones WHERE tenant_id = ? AND list_id = ?`), tenant, list)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[domain.InquiryID]string{}
	for rows.Next() {
		var id domain.InquiryID
		var row string
		if err := rows.Scan(&id, &row); err != nil {
			return nil, err
		}
		out[id] = row
	}
	return out, rows.Err()
}
