package queries

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
)

// Clock is an inquiry's due date, reminders, watchers and SLA clock, from the schedules projection.
// Absent times are omitted: no due date, no pending reminder, no target (or a clock paused while
// waiting), no first response yet.
type Clock struct {
	DueAt              *time.Time           `json:"due_at,omitempty"`
	NextFollowUpAt     *time.Time           `json:"next_follow_up_at,omitempty"`
	FirstResponseDueAt *time.Time           `json:"first_response_due_at,omitempty"`
	ResolutionDueAt    *time.Time           `json:"resolution_due_at,omitempty"`
	FirstRespondedAt   *time.Time           `json:"first_responded_at,omitempty"`
	Breached           []string             `json:"breached"`
	EscalationLevel    int                  `json:"escalation_level"`
	Watchers           []domain.PrincipalID `json:"watchers"`
	Team               string               `json:"team"`
}

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := time.Unix(0, n.Int64).UTC()
	return &t
}

// Clock returns an inquiry's clock; domain.ErrNotFound if the tenant has no such inquiry (or the
// schedules projection has not applied it yet).
func (r *Reader) Clock(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (Clock, error) {
	var c Clock
	var due, next, frDue, resDue, fr sql.NullInt64
	var breached, watchers string
	err := r.DB.QueryRowContext(ctx, r.DB.Rebind(`SELECT due_at, next_follow_up_at, first_response_due_at, resolution_due_at,
		first_responded_at, breached_targets, escalation_level, watchers, team FROM sla_clock WHERE tenant_id = ? AND inquiry_id = ?`),
		tenant, id).Scan(&due, &next, &frDue, &resDue, &fr, &breached, &c.EscalationLevel, &watchers, &c.Team)
	if errors.Is(err, sql.ErrNoRows) {
		return Clock{}, fmt.Errorf("inquiry clock: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Clock{}, err
	}
	c.DueAt, c.NextFollowUpAt, c.FirstResponseDueAt, c.ResolutionDueAt, c.FirstRespondedAt =
		nullTime(due), nullTime(next), nullTime(frDue), nullTime(resDue), nullTime(fr)
	c.Breached = []string{}
	if breached != "" {
		c.Breached = strings.Split(breached, ",")
	}
	if err := json.Unmarshal([]byte(watchers), &c.Watchers); err != nil {
		return Clock{}, fmt.Errorf("inquiry clock watchers: %w", err)
	}
	if c.Watchers == nil {
		c.Watchers = []domain.PrincipalID{}
	}
	return c, nil
}

// clockFilters adds the list filters that read the clock: breached and due_before.
func clockFilters(f Filter, where []string, args []any) ([]string, []any) {
	const clock = `EXISTS (SELECT 1 FROM sla_clock c WHERE c.tenant_id = qm_inquiries.tenant_id AND c.inquiry_id = qm_inquiries.id AND `
	if f.Breached != nil {
		where, args = append(where, clock+`c.breached = ?)`), append(args, boolInt(*f.Breached))
	}
	if !f.DueBefore.IsZero() {
		n := f.DueBefore.UnixNano()
		where = append(where, clock+`(c.due_at < ? OR c.first_response_due_at < ? OR c.resolution_due_at < ?))`)
		args = append(args, n, n, n)
	}
	return where, args
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}
