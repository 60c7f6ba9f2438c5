package callbacks

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

// History reads the latest entry of an inquiry's timeline, tenant-scoped (*queries.Reader).
type History interface {
	LastTimelineEntry(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (queries.TimelineEntry, error)
}

// Store is what the handler needs of the installation registry (*slackinstall.Store).
type Store interface {
	SigningSecrets(ctx context.Context) ([]slackinstall.Signing, error)
	InstallationByKey(ctx context.Context, key string) (slackinstall.Installation, string, error)
	LinkedPrincipal(ctx context.Context, tenant domain.TenantID, key, slackUser string) (domain.PrincipalID, error)
	RecordDisabled(ctx context.Context, tenant domain.TenantID, key, reason, eventID string) error
	// Client is a Web API client with the installation's bot token (for views.open).
	Client(in slackinstall.Installation) *slack.Client
}

var _ Store = (*slackinstall.Store)(nil)

// Threads finds the inquiry of a stored root message (*threads.Worker, wired by the app: the
// callbacks package never imports the threads package).
type Threads interface {
	ThreadByRoot(ctx context.Context, tenant domain.TenantID, key, channel, ts string) (domain.InquiryID, error)
}

// Defaults.
const (
	DefaultMaxBody           = 256 << 10
	DefaultWorkers           = 4
	DefaultQueue             = 64
	DefaultAckBudget         = 2 * time.Second
	DefaultResponseURLPrefix = "https://hooks.slack.com/"
	commandTimeout           = 30 * time.Second
)

// Handler serves POST /slack/interactions and POST /slack/events. It answers within AckBudget
// (well inside Slack's 3 s): commands run on a bounded pool of Workers, and their results reach
// the user through response_url (block actions) or the modal's answer when they finish in time
// (view submissions); the thread itself is updated by the projection. An ack only says the
// delivery was accepted, not that the command succeeded.
type Handler struct {
	Store   Store
	Threads Threads
	// Guard stops every effect kind of an uninstalled installation.
	Guard      *slackeffects.Guard
	Principals commands.Principals
	Commands   commands.Executor
	// Audit records the refusals that happen before the command layer (unknown installation,
	// unlinked user, disabled principal, unknown thread, another workspace) beside the commands'
	// own entries; nil records nothing.
	Audit commands.AuditSink
	// Load reads an inquiry to explain a refusal ("now resolved"); nil omits the detail.
	Load func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error)
	// History names who changed an inquiry last ("changed by Bob"); nil omits the name.
	History History
	Seen    *Seen
	Now     func() time.Time
	Logger  *slog.Logger
	// HTTPClient posts to response_url; nil uses one with a 10 s timeout.
	HTTPClient *http.Client
	// ResponseURLPrefix is the only prefix a response_url may have (DefaultResponseURLPrefix).
	ResponseURLPrefix string
	MaxBody           int64
	Workers           int
	Queue             int
	AckBudget         time.Duration

	// Refresh queues a re-render of an inquiry's thread at version (the thread effect, keyed by
	// tenant, inquiry and version, so asking twice is one job); nil queues nothing.
	Refresh func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, version uint64) error

	// Policy reads the tenant's SLA policy, whose time zone "tomorrow 9:00" in the Remind me modal
	// is in (none, or nil: UTC).
	Policy func(ctx context.Context, tenant domain.TenantID) (*domain.SLAPolicy, error)

	once   sync.Once
	mu     sync.Mutex
	jobs   chan func()
	closed bool
	wg     sync.WaitGroup
}

func (h *Handler) start() {
	h.once.Do(func() {
		if h.Workers <= 0 {
			h.Workers = DefaultWorkers
		}
		if h.Queue <= 0 {
			h.Queue = DefaultQueue
		}
		h.jobs = make(chan func(), h.Queue)
		for range h.Workers {
			h.wg.Go(func() {
				for job := range h.jobs {
					job()
				}
			})
		}
	})
}

// submit queues job; false when the queue is full or the handler is closed.
func (h *Handler) submit(job func()) bool {
	h.start()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	select {
	case h.jobs <- job:
		return true
	default:
		return false
	}
}

// Close stops accepting work and waits for queued commands and replies to finish.
func (h *Handler) Close() error {
	h.start()
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.jobs)
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}
