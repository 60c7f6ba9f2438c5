// Package duejobs is Casebook's durable due-job store and its tick: reminders, SLA warnings and
// breaches, and escalations that happen because time passed.
//
// A due job is an application-owned row in due_jobs (SQLite and Postgres alike), never only a
// queue library's: tenant, inquiry, kind, due time and its time-zone basis, payload class,
// recipient policy, the inquiry's cancellation generation, state, claim owner and expiry, attempts
// (with their history in due_job_history), next attempt and dead-letter reason.
//
// A tick claims the oldest due jobs in a bounded batch with one conditional UPDATE: a job is
// claimable while ready_at (a pending job's next attempt, a claimed job's claim expiry) has passed.
// Every claim increments the job's fencing token; completion and failure are conditional on it,
// so a worker whose claim expired and was taken over cannot overwrite the new owner's outcome. On
// SQLite the UPDATE runs under the single writer lock; on Postgres the candidate rows are locked
// with FOR UPDATE SKIP LOCKED, so replicas ticking at once claim disjoint batches. Execution is at
// least once; the event a job appends carries a deterministic idempotency key, so a job run twice
// (a claim expired after its append) appends once — the dedupe-by-conditional-write pattern.
package duejobs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// State is a due job's state.
type State string

// The states. Pending and claimed jobs are live; the others are final until an operator retries.
const (
	StatePending   State = "pending"
	StateClaimed   State = "claimed"
	StateDone      State = "done"      // fired, or found that its reason had gone
	StateCancelled State = "cancelled" // withdrawn (follow-up cancelled, clock superseded, operator)
	StateDead      State = "dead"      // attempts exhausted or a permanent failure: the dead letter
	StateResolved  State = "resolved"  // an operator marked it handled by hand
)

// States lists every state.
var States = []State{StatePending, StateClaimed, StateDone, StateCancelled, StateDead, StateResolved}

// Job is one due job.
type Job struct {
	ID       string           `json:"id"`
	Tenant   domain.TenantID  `json:"tenant_id"`
	Inquiry  domain.InquiryID `json:"inquiry_id"`
	Kind     string           `json:"kind"`
	Target   string           `json:"target,omitempty"` // SLA target of SLA kinds and escalations
	DueAt    time.Time        `json:"due_at"`
	TimeZone string           `json:"time_zone"` // the basis the due time was computed in
	// PayloadClass is the most restricted field class the job's effect may carry.
	PayloadClass string `json:"payload_class"`
	// RecipientPolicy names who is told: owner_watchers (a reminder), escalation_destination.
	RecipientPolicy string `json:"recipient_policy"`
	Generation      uint64 `json:"generation"`
	Level           int    `json:"level,omitempty"`

	State          State      `json:"state"`
	ClaimOwner     string     `json:"claim_owner,omitempty"`
	ClaimToken     int64      `json:"claim_token"`
	ClaimExpiresAt *time.Time `json:"claim_expires_at,omitempty"`
	Attempts       int        `json:"attempts"`
	MaxAttempts    int        `json:"max_attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"`
	ExpiredClaims  int        `json:"expired_claims"`
	LastError      string     `json:"last_error,omitempty"`
	DeadReason     string     `json:"dead_reason,omitempty"`
	Outcome        string     `json:"outcome,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// DueJob returns what the domain needs to decide the job.
func (j Job) DueJob() domain.DueJob {
	return domain.DueJob{ID: j.ID, Kind: j.Kind, Target: j.Target, DueAt: j.DueAt, Generation: j.Generation, Level: j.Level}
}

// HistoryEntry is one attempt or review of a job.
type HistoryEntry struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`  // the claiming worker, or the reviewing principal
	Action string    `json:"action"` // claimed, fired, moved_on, failed, dead, retry, cancel, resolve, expired
	Detail string    `json:"detail,omitempty"`
}

// DefaultMaxAttempts bounds a job's attempts before it is dead-lettered.
const DefaultMaxAttempts = 8

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS due_jobs (
	id               TEXT    NOT NULL PRIMARY KEY,
	tenant_id        TEXT    NOT NULL,
	inquiry_id       TEXT    NOT NULL,
	kind             TEXT    NOT NULL,
	target           TEXT    NOT NULL DEFAULT '',
	due_at           BIGINT  NOT NULL,
	time_zone        TEXT    NOT NULL,
	payload_class    TEXT    NOT NULL,
	recipient_policy TEXT    NOT NULL,
	generation       BIGINT  NOT NULL,
	level            INTEGER NOT NULL DEFAULT 0,
	state            TEXT    NOT NULL,
	ready_at         BIGINT,
	claim_owner      TEXT    NOT NULL DEFAULT '',
	claim_token      BIGINT  NOT NULL DEFAULT 0,
	claim_expires_at BIGINT,
	attempts         INTEGER NOT NULL DEFAULT 0,
	max_attempts     INTEGER NOT NULL,
	next_attempt_at  BIGINT,
	expired_claims   INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT    NOT NULL DEFAULT '',
	dead_reason      TEXT    NOT NULL DEFAULT '',
	outcome          TEXT    NOT NULL DEFAULT '',
	created_at       BIGINT  NOT NULL,
	updated_at       BIGINT  NOT NULL
);
CREATE INDEX IF NOT EXISTS due_jobs_ready ON due_jobs (ready_at) WHERE ready_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS due_jobs_inquiry ON due_jobs (tenant_id, inquiry_id);
CREATE INDEX IF NOT EXISTS due_jobs_state ON due_jobs (state, tenant_id, due_at);
CREATE TABLE IF NOT EXISTS due_job_history (
	job_id TEXT   NOT NULL,
	seq    BIGINT NOT NULL,
	at     BIGINT NOT NULL,
	actor  TEXT   NOT NULL,
	action TEXT   NOT NULL,
	detail TEXT   NOT NULL DEFAULT '',
	PRIMARY KEY (job_id, seq)
)`}, {Version: 2, SQL: `
DROP INDEX IF EXISTS due_jobs_ready;
CREATE INDEX IF NOT EXISTS due_jobs_ready_id ON due_jobs (ready_at, id) WHERE ready_at IS NOT NULL`}}

// Store is the due_jobs table.
type Store struct {
	DB  *sqldb.DB
	Now func() time.Time
}

// NewStore migrates the tables and returns the store.
func NewStore(ctx context.Context, db *sqldb.DB, now func() time.Time) (*Store, error) {
	if err := sqldb.Migrate(ctx, db, "due_jobs", migrations); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Store{DB: db, Now: now}, nil
}

// JobID derives a job's id from its identity, so scheduling the same job twice finds the first.
func JobID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "dj_" + hex.EncodeToString(sum[:12])
}

// ErrLostClaim: the job is no longer claimed with the caller's token (the claim expired and another
// worker took it, or an operator changed it). The caller's outcome is dropped.
var ErrLostClaim = errors.New("due job claim lost")

const jobColumns = `id, tenant_id, inquiry_id, kind, target, due_at, time_zone, payload_class, recipient_policy, generation, level,
	state, claim_owner, claim_token, claim_expires_at, attempts, max_attempts, next_attempt_at, expired_claims, last_error,
	dead_reason, outcome, created_at, updated_at`

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var due, created, updated int64
	var expires, next sql.NullInt64
	if err := row.Scan(&j.ID, &j.Tenant, &j.Inquiry, &j.Kind, &j.Target, &due, &j.TimeZone, &j.PayloadClass, &j.RecipientPolicy,
		&j.Generation, &j.Level, &j.State, &j.ClaimOwner, &j.ClaimToken, &expires, &j.Attempts, &j.MaxAttempts, &next,
		&j.ExpiredClaims, &j.LastError, &j.DeadReason, &j.Outcome, &created, &updated); err != nil {
		return Job{}, err
	}
	j.DueAt, j.CreatedAt, j.UpdatedAt = nanos(due), nanos(created), nanos(updated)
	j.ClaimExpiresAt, j.NextAttemptAt = nullTime(expires), nullTime(next)
	return j, nil
}

func nanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := nanos(n.Int64)
	return &t
}

// Execer is a transaction or handle to write through (a projection batch's transaction).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Schedule inserts j as pending unless a job with its id exists (then nothing changes: the
// schedule is idempotent, and a job that already ran is not revived). It runs in tx.
func Schedule(ctx context.Context, db *sqldb.DB, tx Execer, j Job, now time.Time) error {
	if j.MaxAttempts == 0 {
		j.MaxAttempts = DefaultMaxAttempts
	}
	_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO due_jobs (id, tenant_id, inquiry_id, kind, target, due_at, time_zone,
		payload_class, recipient_policy, generation, level, state, ready_at, next_attempt_at, max_attempts, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
		j.ID, j.Tenant, j.Inquiry, j.Kind, j.Target, j.DueAt.UnixNano(), j.TimeZone, j.PayloadClass, j.RecipientPolicy,
		int64(j.Generation), j.Level, j.DueAt.UnixNano(), j.DueAt.UnixNano(), j.MaxAttempts, now.UnixNano(), now.UnixNano())
	return err
}

// CancelPending cancels the inquiry's pending jobs of the given kinds for which keep returns
// false, with outcome as the reason. Claimed jobs are left to their worker, which finds that the
// inquiry moved on. It runs in tx.
func CancelPending(ctx context.Context, db *sqldb.DB, tx *sql.Tx, tenant domain.TenantID, inquiry domain.InquiryID, kinds []string,
	keep func(id string, generation uint64) bool, outcome string, now time.Time) error {
	var cancel []string
	err := func() error {
		rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT id, kind, generation FROM due_jobs WHERE tenant_id = ? AND inquiry_id = ? AND state = 'pending'`),
			tenant, inquiry)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, kind string
			var gen int64
			if err := rows.Scan(&id, &kind, &gen); err != nil {
				return err
			}
			if slices.Contains(kinds, kind) && !keep(id, uint64(gen)) {
				cancel = append(cancel, id)
			}
		}
		return rows.Err()
	}()
	if err != nil {
		return err
	}
	for _, id := range cancel {
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE due_jobs SET state = 'cancelled', ready_at = NULL, next_attempt_at = NULL,
			outcome = ?, updated_at = ? WHERE id = ? AND state = 'pending'`), outcome, now.UnixNano(), id); err != nil {
			return err
		}
	}
	return nil
}

// Claim claims up to limit of the oldest claimable jobs for owner until now+ttl. A job whose claim
// expired is claimable again (its expiry is counted). Each claim increments the job's token.
func (s *Store) Claim(ctx context.Context, owner string, limit int, ttl time.Duration) ([]Job, error) {
	if limit < 1 {
		return nil, nil
	}
	now := s.Now()
	expires := now.Add(ttl).UnixNano()
	pick := `SELECT id FROM due_jobs WHERE ready_at <= ? ORDER BY ready_at, id LIMIT ?`
	if s.DB.Dialect == sqldb.Postgres {
		pick += ` FOR UPDATE SKIP LOCKED`
	}
	var out []Job
	err := sqldb.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, s.DB.Rebind(`UPDATE due_jobs SET
			expired_claims = expired_claims + CASE WHEN state = 'claimed' THEN 1 ELSE 0 END,
			state = 'claimed', claim_owner = ?, claim_token = claim_token + 1, claim_expires_at = ?, ready_at = ?,
			attempts = attempts + 1, updated_at = ?
			WHERE id IN (`+pick+`) AND ready_at <= ? RETURNING `+jobColumns),
			owner, expires, expires, now.UnixNano(), now.UnixNano(), limit, now.UnixNano())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		// RETURNING has no order: hand the batch out oldest due first.
		sort.Slice(out, func(a, b int) bool {
			if !out[a].DueAt.Equal(out[b].DueAt) {
				return out[a].DueAt.Before(out[b].DueAt)
			}
			return out[a].ID < out[b].ID
		})
		for _, j := range out {
			detail := fmt.Sprintf("attempt %d, token %d", j.Attempts, j.ClaimToken)
			if j.ExpiredClaims > 0 && j.Attempts > 1 {
				detail += fmt.Sprintf(", %d expired claim(s) so far", j.ExpiredClaims)
			}
			if err := history(ctx, s.DB, tx, j.ID, now, owner, "claimed", detail); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim due jobs: %w", err)
	}
	return out, nil
}

func history(ctx context.Context, db *sqldb.DB, tx *sql.Tx, id string, at time.Time, actor, action, detail string) error {
	_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO due_job_history (job_id, seq, at, actor, action, detail)
		SELECT ?, coalesce(max(seq), 0) + 1, ?, ?, ?, ? FROM due_job_history WHERE job_id = ?`), id, at.UnixNano(), actor, action, detail, id)
	return err
}

// Complete finishes a claimed job with its outcome (fired, moved_on). ErrLostClaim when the claim is
// no longer the caller's.
func (s *Store) Complete(ctx context.Context, j Job, outcome string) error {
	return s.finish(ctx, j, func(tx *sql.Tx, now time.Time) (sql.Result, error) {
		return tx.ExecContext(ctx, s.DB.Rebind(`UPDATE due_jobs SET state = 'done', outcome = ?, ready_at = NULL, next_attempt_at = NULL,
			claim_owner = '', claim_expires_at = NULL, last_error = '', updated_at = ? WHERE id = ? AND state = 'claimed' AND claim_token = ?`),
			outcome, now.UnixNano(), j.ID, j.ClaimToken)
	}, outcome, "")
}

// Fail records a failed attempt. A retryable failure with attempts left goes back to pending at
// next; otherwise the job is dead-lettered with the error as its reason.
func (s *Store) Fail(ctx context.Context, j Job, cause error, retryable bool, next time.Time) (State, error) {
	msg := cause.Error()
	if len(msg) > 500 {
		msg = msg[:500]
	}
	state := StatePending
	if !retryable || j.Attempts >= j.MaxAttempts {
		state = StateDead
	}
	err := s.finish(ctx, j, func(tx *sql.Tx, now time.Time) (sql.Result, error) {
		if state == StateDead {
			reason := "permanent failure: " + msg
			if retryable {
				reason = fmt.Sprintf("%d attempts exhausted; last error: %s", j.Attempts, msg)
			}
			return tx.ExecContext(ctx, s.DB.Rebind(`UPDATE due_jobs SET state = 'dead', dead_reason = ?, last_error = ?, ready_at = NULL,
				next_attempt_at = NULL, claim_owner = '', claim_expires_at = NULL, updated_at = ? WHERE id = ? AND state = 'claimed' AND claim_token = ?`),
				reason, msg, now.UnixNano(), j.ID, j.ClaimToken)
		}
		return tx.ExecContext(ctx, s.DB.Rebind(`UPDATE due_jobs SET state = 'pending', last_error = ?, ready_at = ?, next_attempt_at = ?,
			claim_owner = '', claim_expires_at = NULL, updated_at = ? WHERE id = ? AND state = 'claimed' AND claim_token = ?`),
			msg, next.UnixNano(), next.UnixNano(), now.UnixNano(), j.ID, j.ClaimToken)
	}, map[State]string{StatePending: "failed", StateDead: "dead"}[state], msg)
	return state, err
}

func (s *Store) finish(ctx context.Context, j Job, update func(*sql.Tx, time.Time) (sql.Result, error), action, detail string) error {
	now := s.Now()
	return sqldb.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		res, err := update(tx, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrLostClaim
		}
		return history(ctx, s.DB, tx, j.ID, now, j.ClaimOwner, action, detail)
	})
}

// Get returns one of tenant's jobs; domain.ErrNotFound for an unknown id or another tenant's.
func (s *Store) Get(ctx context.Context, tenant domain.TenantID, id string) (Job, error) {
	j, err := scanJob(s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT `+jobColumns+` FROM due_jobs WHERE tenant_id = ? AND id = ?`), tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("due job: %w", domain.ErrNotFound)
	}
	return j, err
}

// History returns a job's attempts and reviews, oldest first.
func (s *Store) History(ctx context.Context, tenant domain.TenantID, id string) ([]HistoryEntry, error) {
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT seq, at, actor, action, detail FROM due_job_history WHERE job_id = ? ORDER BY seq`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []HistoryEntry
	for rows.Next() {
		var h HistoryEntry
		var at int64
		if err := rows.Scan(&h.Seq, &at, &h.Actor, &h.Action, &h.Detail); err != nil {
			return nil, err
		}
		h.At = nanos(at)
		out = append(out, h)
	}
	return out, rows.Err()
}

// ListFilter selects jobs of one tenant. Zero fields do not filter.
type ListFilter struct {
	State   State
	Inquiry domain.InquiryID
	Limit   int // 1..500, default 100
}

// List returns a tenant's jobs by due time.
func (s *Store) List(ctx context.Context, tenant domain.TenantID, f ListFilter) ([]Job, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > 500 {
		return nil, domain.Invalid("limit", "must be between 1 and 500")
	}
	where, args := []string{"tenant_id = ?"}, []any{tenant}
	if f.State != "" {
		if _, err := ParseState(string(f.State)); err != nil {
			return nil, err
		}
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.Inquiry != "" {
		where, args = append(where, "inquiry_id = ?"), append(args, f.Inquiry)
	}
	args = append(args, f.Limit)
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT `+jobColumns+` FROM due_jobs WHERE `+strings.Join(where, " AND ")+
		` ORDER BY due_at, id LIMIT ?`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ParseState returns the state named s or a validation error.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", domain.Invalid("state", "unknown state %q", s)
}

// Review is an operator's manual recovery of a job: retry, cancel or resolve.
type Review struct {
	Tenant domain.TenantID
	JobID  string
	Actor  domain.Principal
	Action string // retry, cancel, resolve
	Reason string
}

// Review actions.
const (
	ReviewRetry   = "retry"
	ReviewCancel  = "cancel"
	ReviewResolve = "resolve"
)

// MaxReviewReason bounds a review's reason.
const MaxReviewReason = 1000

// Review applies r and records its actor and reason in the job's history. Only admins review.
// Retry puts a dead, cancelled or resolved job (or a pending one) back to pending now with fresh
// attempts; cancel and resolve end a pending or dead job. A claimed job is being run: reviewing it is
// domain.ErrConflict until its claim ends. Another tenant's job is domain.ErrNotFound.
func (s *Store) Review(ctx context.Context, r Review) (Job, error) {
	if err := domain.Authorize(r.Actor, domain.ActAdminister); err != nil {
		return Job{}, err
	}
	if r.Actor.TenantID != r.Tenant {
		return Job{}, fmt.Errorf("due job: %w", domain.ErrNotFound)
	}
	r.Reason = strings.TrimSpace(r.Reason)
	if r.Reason == "" {
		return Job{}, domain.Invalid("reason", "is required: a review records why")
	}
	if len([]rune(r.Reason)) > MaxReviewReason {
		return Job{}, domain.Invalid("reason", "must be at most %d characters", MaxReviewReason)
	}
	var from []State
	var set string
	now := s.Now()
	args := []any{}
	switch r.Action {
	case ReviewRetry:
		from = []State{StateDead, StateCancelled, StateResolved, StatePending}
		set = `state = 'pending', attempts = 0, ready_at = ?, next_attempt_at = ?, dead_reason = '', outcome = ''`
		args = append(args, now.UnixNano(), now.UnixNano())
	case ReviewCancel:
		from = []State{StatePending, StateDead}
		set = `state = 'cancelled', ready_at = NULL, next_attempt_at = NULL, outcome = 'cancelled by review'`
	case ReviewResolve:
		from = []State{StatePending, StateDead}
		set = `state = 'resolved', ready_at = NULL, next_attempt_at = NULL, outcome = 'resolved by review'`
	default:
		return Job{}, domain.Invalid("action", "must be retry, cancel or resolve")
	}
	err := sqldb.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		j, err := scanJob(tx.QueryRowContext(ctx, s.DB.Rebind(`SELECT `+jobColumns+` FROM due_jobs WHERE tenant_id = ? AND id = ?`), r.Tenant, r.JobID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("due job: %w", domain.ErrNotFound)
		}
		if err != nil {
			return err
		}
		ok := false
		for _, st := range from {
			ok = ok || j.State == st
		}
		if !ok {
			return fmt.Errorf("a %s job cannot be %s: %w", j.State, map[string]string{ReviewRetry: "retried", ReviewCancel: "cancelled", ReviewResolve: "resolved"}[r.Action], domain.ErrConflict)
		}
		res, err := tx.ExecContext(ctx, s.DB.Rebind(`UPDATE due_jobs SET `+set+`, claim_owner = '', claim_expires_at = NULL, updated_at = ?
			WHERE id = ? AND state = ?`), append(args, now.UnixNano(), j.ID, j.State)...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("due job changed meanwhile: %w", domain.ErrConflict)
		}
		return history(ctx, s.DB, tx, j.ID, now, string(r.Actor.ID), r.Action, r.Reason)
	})
	if err != nil {
		return Job{}, err
	}
	return s.Get(ctx, r.Tenant, r.JobID)
}

// Health is what alerts watch, over every tenant.
type Health struct {
	// OverdueUnclaimed counts pending jobs due more than the grace ago.
	OverdueUnclaimed int64 `json:"overdue_unclaimed"`
	// ExpiredClaims counts claimed jobs whose claim has expired and not yet been taken over.
	ExpiredClaims int64 `json:"expired_claims"`
	// RepeatedFailures counts pending jobs that have failed at least RepeatedFailureAttempts times.
	RepeatedFailures int64 `json:"repeated_failures"`
	// Dead is the dead letter's size.
	Dead int64 `json:"dead"`
	// Pending counts live pending jobs (due or not).
	Pending int64 `json:"pending"`
}

// RepeatedFailureAttempts is the attempt count from which a pending job counts as failing repeatedly.
const RepeatedFailureAttempts = 3

// Health counts jobs for the metrics. Every count reads an index range.
func (s *Store) Health(ctx context.Context, grace time.Duration) (Health, error) {
	now := s.Now().UnixNano()
	var h Health
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT
		(SELECT count(*) FROM due_jobs WHERE ready_at <= ? AND state = 'pending'),
		(SELECT count(*) FROM due_jobs WHERE ready_at <= ? AND state = 'claimed'),
		(SELECT count(*) FROM due_jobs WHERE state = 'pending' AND attempts >= ?),
		(SELECT count(*) FROM due_jobs WHERE state = 'dead'),
		(SELECT count(*) FROM due_jobs WHERE state = 'pending')`),
		now-grace.Nanoseconds(), now, RepeatedFailureAttempts).Scan(&h.OverdueUnclaimed, &h.ExpiredClaims, &h.RepeatedFailures, &h.Dead, &h.Pending)
	return h, err
}

// scheduleChunk bounds the rows of one multi-row statement (17 parameters a row).
const scheduleChunk = 200

// ScheduleMany is Schedule for many jobs: multi-row inserts of scheduleChunk rows in tx, each row
// unchanged when its id exists. A projection batch writes its jobs with it.
func ScheduleMany(ctx context.Context, db *sqldb.DB, tx Execer, jobs []Job, now time.Time) error {
	for i := 0; i < len(jobs); i += scheduleChunk {
		part := jobs[i:min(i+scheduleChunk, len(jobs))]
		args := make([]any, 0, 16*len(part))
		for _, j := range part {
			if j.MaxAttempts == 0 {
				j.MaxAttempts = DefaultMaxAttempts
			}
			args = append(args, j.ID, j.Tenant, j.Inquiry, j.Kind, j.Target, j.DueAt.UnixNano(), j.TimeZone, j.PayloadClass, j.RecipientPolicy,
				int64(j.Generation), j.Level, j.DueAt.UnixNano(), j.DueAt.UnixNano(), j.MaxAttempts, now.UnixNano(), now.UnixNano())
		}
		row := "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)"
		values := strings.TrimSuffix(strings.Repeat(row+", ", len(part)), ", ")
		if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO due_jobs (id, tenant_id, inquiry_id, kind, target, due_at, time_zone,
			payload_class, recipient_policy, generation, level, state, ready_at, next_attempt_at, max_attempts, created_at, updated_at)
			VALUES `+values+` ON CONFLICT (id) DO NOTHING`), args...); err != nil {
			return err
		}
	}
	return nil
}

// InquiryKey names one inquiry of one tenant.
type InquiryKey struct {
	Tenant  domain.TenantID
	Inquiry domain.InquiryID
}

// PendingJob is what a scheduler needs of a pending job to decide whether it still stands.
type PendingJob struct {
	ID         string
	Kind       string
	Generation uint64
}

// Querier is a transaction or handle to read through.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// PendingOf returns the pending jobs of the given inquiries, read in tx with one query per 500
// inquiries (the due_jobs_inquiry index).
func PendingOf(ctx context.Context, db *sqldb.DB, tx Querier, keys []InquiryKey) (map[InquiryKey][]PendingJob, error) {
	out := map[InquiryKey][]PendingJob{}
	want := map[InquiryKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	const chunk = 500
	for i := 0; i < len(keys); i += chunk {
		part := keys[i:min(i+chunk, len(keys))]
		tenants := map[domain.TenantID]bool{}
		var args []any
		for _, k := range part {
			if !tenants[k.Tenant] {
				tenants[k.Tenant] = true
				args = append(args, k.Tenant)
			}
		}
		nt := len(args)
		for _, k := range part {
			args = append(args, k.Inquiry)
		}
		marks := func(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }
		err := func() error {
			rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT tenant_id, inquiry_id, id, kind, generation FROM due_jobs
				WHERE tenant_id IN (`+marks(nt)+`) AND inquiry_id IN (`+marks(len(part))+`) AND state = 'pending'`), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k InquiryKey
				var p PendingJob
				var gen int64
				if err := rows.Scan(&k.Tenant, &k.Inquiry, &p.ID, &p.Kind, &gen); err != nil {
					return err
				}
				p.Generation = uint64(gen)
				if want[k] { // the cross product of the two IN lists may name another tenant's inquiry
					out[k] = append(out[k], p)
				}
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CancelIDs cancels the pending jobs among ids with outcome as the reason, in tx; jobs no longer
// pending (claimed meanwhile: their worker finds the inquiry moved on) are left alone.
func CancelIDs(ctx context.Context, db *sqldb.DB, tx Execer, ids []string, outcome string, now time.Time) error {
	const chunk = 500
	for i := 0; i < len(ids); i += chunk {
		part := ids[i:min(i+chunk, len(ids))]
		args := []any{outcome, now.UnixNano()}
		for _, id := range part {
			args = append(args, id)
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE due_jobs SET state = 'cancelled', ready_at = NULL, next_attempt_at = NULL,
			outcome = ?, updated_at = ? WHERE state = 'pending' AND id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(part)), ", ")+`)`), args...); err != nil {
			return err
		}
	}
	return nil
}
