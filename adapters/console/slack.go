package console

import (
	"context"
	"time"

	"github.com/casebook/casebook/domain"
)

// SlackState is an inquiry's Slack projection state: "saved; Slack pending/failed".
type SlackState struct {
	State           string // pending, synced, failed, disabled or unknown
	DesiredVersion  uint64
	ObservedVersion uint64
	Channel         string
	LastSuccess     *time.Time
	LastError       string
	ErrorClass      string
}

// Effect is one Slack effect job (a thread or List write) as an operator sees it.
type Effect struct {
	ID          int64
	Kind        string
	State       string
	Inquiry     domain.InquiryID
	Version     uint64
	Attempt     int
	MaxAttempts int
	LastError   string
	ScheduledAt time.Time
	FinalizedAt *time.Time
}

// Target is one place an inquiry is projected to in Slack (its thread, a List row) and how the
// last write there went.
type Target struct {
	Kind        string // thread or list_row
	Destination string // channel or List id
	LastSuccess time.Time
	LastError   string
	ErrorClass  string
	LastErrorAt time.Time
}

// Circuit is a Slack destination's health.
type Circuit struct {
	Channel       string
	Open          bool
	Reason        string
	OpenedAt      time.Time
	CooldownUntil time.Time
}

// Table is a read-only admin section (Lists, installations and destinations): column names and
// rows of text.
type Table struct {
	Title   string
	Note    string
	Columns []string
	Rows    [][]string
}

// Slack is what the console needs of the Slack projection, always within one tenant (another
// tenant's job or channel is domain.ErrNotFound).
type Slack interface {
	Health(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (SlackState, error)
	// Targets are the inquiry's Slack targets (thread, List rows) with their last outcome.
	Targets(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) ([]Target, error)
	// Effects lists the tenant's effect jobs, newest first; states filters when not empty, and
	// inquiry when set.
	Effects(ctx context.Context, tenant domain.TenantID, states []string, inquiry domain.InquiryID) ([]Effect, error)
	RetryEffect(ctx context.Context, tenant domain.TenantID, id int64) error
	CancelEffect(ctx context.Context, tenant domain.TenantID, id int64) error
	Circuits(ctx context.Context, tenant domain.TenantID) ([]Circuit, error)
	CloseCircuit(ctx context.Context, tenant domain.TenantID, channel string) error
	// Tables are the read-only sections: Lists, installations, destinations.
	Tables(ctx context.Context, tenant domain.TenantID) ([]Table, error)
}
