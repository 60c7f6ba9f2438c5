package slackproj

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// Queue is the River queue of Slack effects.
const Queue = "slack"

// MaxAttempts bounds retries of failures with an unknown or transient cause; then the job is
// discarded (the dead letter). Snoozes (cooldowns, open circuits) spend no attempt.
const MaxAttempts = 12

// SyncArgs asks for an inquiry's thread to show at least Version. Unique per tenant + inquiry +
// kind + version; the worker applies the newest canonical version it finds, so older jobs coalesce.
type SyncArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	Version uint64           `json:"version"`
}

// Kind implements river.JobArgs.
func (SyncArgs) Kind() string { return "slack_thread_sync" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (SyncArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// TenantTag scopes a job to its tenant for the admin views.
func TenantTag(t domain.TenantID) string { return "tenant_" + string(t) }

func tenantTag(t domain.TenantID) string { return TenantTag(t) }

// Driver returns River's driver for db: riversqlite for the embedded file, riverdatabasesql for
// Postgres. Both work on the *sql.Tx of a projection batch.
func Driver(db *sqldb.DB) riverdriver.Driver[*sql.Tx] {
	if db.Dialect == sqldb.Postgres {
		return riverdatabasesql.New(db.DB)
	}
	return riversqlite.New(db.DB)
}

// MigrateRiver creates or upgrades River's tables.
func MigrateRiver(ctx context.Context, db *sqldb.DB, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := rivermigrate.New(Driver(db), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return err
	}
	if db.Dialect == sqldb.Postgres {
		// Replicas starting together take turns: River's migrator is not safe to run concurrently.
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(7345110023)`); err != nil {
			return err
		}
		defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7345110023)`) }()
	}
	// Each River migration commits on its own; a process that lost a race with another (SQLite has
	// no advisory lock) finds the version applied when it tries again.
	for attempt := 1; ; attempt++ {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err == nil || attempt == 5 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	Logger *slog.Logger
	// Worker, when set, is registered and the client can work the Slack queue once started;
	// without it the client only inserts and manages jobs.
	Worker *Worker
	// Workers is the Slack queue's concurrency (default 2).
	Workers int
	// FetchPollInterval is how often an idle client looks for jobs (River's default when zero).
	FetchPollInterval time.Duration
}

// NewClient returns a River client on db.
func NewClient(db *sqldb.DB, cfg ClientConfig) (*river.Client[*sql.Tx], error) {
	rc := &river.Config{Logger: cfg.Logger, FetchPollInterval: cfg.FetchPollInterval, MaxAttempts: MaxAttempts}
	if rc.Logger == nil {
		rc.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FetchPollInterval > 0 {
		rc.FetchCooldown = min(cfg.FetchPollInterval, 100*time.Millisecond)
	}
	if cfg.Worker != nil {
		workers := river.NewWorkers()
		if err := river.AddWorkerSafely(workers, cfg.Worker); err != nil {
			return nil, err
		}
		n := cfg.Workers
		if n <= 0 {
			n = 2
		}
		rc.Workers = workers
		rc.Queues = map[string]river.QueueConfig{Queue: {MaxWorkers: n}}
	}
	return river.NewClient(Driver(db), rc)
}

// Effect is a Slack effect job as an operator sees it.
type Effect struct {
	ID          int64              `json:"id"`
	State       rivertype.JobState `json:"state"`
	Tenant      domain.TenantID    `json:"tenant_id"`
	Inquiry     domain.InquiryID   `json:"inquiry_id"`
	Version     uint64             `json:"version"`
	Attempt     int                `json:"attempt"`
	MaxAttempts int                `json:"max_attempts"`
	LastError   string             `json:"last_error,omitempty"`
	ScheduledAt time.Time          `json:"scheduled_at"`
	FinalizedAt *time.Time         `json:"finalized_at,omitempty"`
}

// Effects manages effect jobs for operators, always within one tenant.
type Effects struct {
	Client *river.Client[*sql.Tx]
}

func toEffect(j *rivertype.JobRow) (Effect, error) {
	var a SyncArgs
	if err := unmarshal(j.EncodedArgs, &a); err != nil {
		return Effect{}, err
	}
	e := Effect{ID: j.ID, State: j.State, Tenant: a.Tenant, Inquiry: a.Inquiry, Version: a.Version,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, ScheduledAt: j.ScheduledAt, FinalizedAt: j.FinalizedAt}
	if n := len(j.Errors); n > 0 {
		e.LastError = j.Errors[n-1].Error
	}
	return e, nil
}

// List returns a tenant's effect jobs, newest first; states filters when not empty.
func (e *Effects) List(ctx context.Context, tenant domain.TenantID, states []rivertype.JobState, limit int) ([]Effect, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	p := river.NewJobListParams().Kinds(SyncArgs{}.Kind()).TagsAny(tenantTag(tenant)).
		OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(limit)
	if len(states) > 0 {
		p = p.States(states...)
	}
	res, err := e.Client.JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Effect, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		ef, err := toEffect(j)
		if err != nil {
			return nil, err
		}
		out = append(out, ef)
	}
	return out, nil
}

// get returns a job of the tenant; another tenant's job is domain.ErrNotFound.
func (e *Effects) get(ctx context.Context, tenant domain.TenantID, id int64) (*rivertype.JobRow, error) {
	j, err := e.Client.JobGet(ctx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return nil, fmt.Errorf("effect: %w", domain.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range j.Tags {
		if t == tenantTag(tenant) && j.Kind == (SyncArgs{}).Kind() {
			return j, nil
		}
	}
	return nil, fmt.Errorf("effect: %w", domain.ErrNotFound)
}

// Retry makes a tenant's job available now (a discarded or cancelled one gets a fresh attempt).
func (e *Effects) Retry(ctx context.Context, tenant domain.TenantID, id int64) (Effect, error) {
	if _, err := e.get(ctx, tenant, id); err != nil {
		return Effect{}, err
	}
	j, err := e.Client.JobRetry(ctx, id)
	if err != nil {
		return Effect{}, err
	}
	return toEffect(j)
}

// Cancel stops a tenant's job for good.
func (e *Effects) Cancel(ctx context.Context, tenant domain.TenantID, id int64) (Effect, error) {
	if _, err := e.get(ctx, tenant, id); err != nil {
		return Effect{}, err
	}
	j, err := e.Client.JobCancel(ctx, id)
	if err != nil {
		return Effect{}, err
	}
	return toEffect(j)
}
