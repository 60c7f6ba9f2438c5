package lists

import (
	"database/sql"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/casebook/casebook/adapters/slack/slackproj"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// Queue is the River queue of List effects (apart from slackproj's thread queue).
const Queue = "slack_lists"

// MaxAttempts bounds retries of unknown/transient failures; then the job is discarded (dead
// letter). Snoozes (cooldown, circuit, drift) spend no attempt.
const MaxAttempts = 12

// SyncArgs asks for an inquiry's row in List to show at least Version. Unique per tenant +
// inquiry + list + version; the worker applies the newest canonical version, so older jobs coalesce.
type SyncArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	List    string           `json:"list_id"`
	Version uint64           `json:"version"`
}

// Kind implements river.JobArgs.
func (SyncArgs) Kind() string { return "slack_list_row_sync" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (SyncArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// RemoveArgs asks to remove a terminal inquiry's row; scheduled at the terminal transition's time
// + the List's delay. The worker re-checks canonical state when it runs.
type RemoveArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	List    string           `json:"list_id"`
	Version uint64           `json:"version"` // the terminal transition's version
}

// Kind implements river.JobArgs.
func (RemoveArgs) Kind() string { return "slack_list_row_remove" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RemoveArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	Logger            *slog.Logger
	Worker            *Worker // nil: an insert-only client
	Workers           int     // the queue's concurrency (default 2)
	FetchPollInterval time.Duration
}

// NewClient returns a River client on db for the List queue.
func NewClient(db *sqldb.DB, cfg ClientConfig) (*river.Client[*sql.Tx], error) {
	rc := &river.Config{Logger: cfg.Logger, FetchPollInterval: cfg.FetchPollInterval, MaxAttempts: MaxAttempts}
	if rc.Logger == nil {
		rc.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FetchPollInterval > 0 {
		rc.FetchCooldown = min(cfg.FetchPollInterval, 100*time.Millisecond)
	}
	if cfg.Worker != nil {
		ws := river.NewWorkers()
		if err := river.AddWorkerSafely[SyncArgs](ws, syncWorker{w: cfg.Worker}); err != nil {
			return nil, err
		}
		if err := river.AddWorkerSafely[RemoveArgs](ws, removeWorker{w: cfg.Worker}); err != nil {
			return nil, err
		}
		n := cfg.Workers
		if n <= 0 {
			n = 2
		}
		rc.Workers = ws
		rc.Queues = map[string]river.QueueConfig{Queue: {MaxWorkers: n}}
	}
	return river.NewClient(slackproj.Driver(db), rc)
}
