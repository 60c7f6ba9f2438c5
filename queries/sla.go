package queries

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	err := r.DB.QueryRowContext(ctx, r.DB.Rebind(`SELECT `+clockColumns+` FROM sla_clock WHERE tenant_id = ? AND inquiry_id = ?`),
		tenant, id).Scan(&due, &next, &frDue, &resDue, &fr, &breached, &c.EscalationLevel, &watchers, &c.Team)
	if errors.Is(err, sql.ErrNoRows) {
		return Clock{}, fmt.Errorf("inquiry clock: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Clock{}, err
	}
	return c.fill(due, next, frDue, resDue, fr, breached, watchers)
}

// clockColumns are the sla_clock columns Clock and Detail read, in clockRow's order.
const clockColumns = `due_at, next_follow_up_at, first_response_due_at, resolution_due_at,
		first_responded_at, breached_targets, escalation_level, watchers, team`

// fill completes a clock whose level and team are scanned from the stored columns.
func (c Clock) fill(due, next, frDue, resDue, fr sql.NullInt64, breached, watchers string) (Clock, error) {
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
		// A literal, not a parameter: only then may the planner use the index of breached clocks,
		// which holds breached = 1 alone.
		where = append(where, clock+`c.breached = `+strconv.Itoa(boolInt(*f.Breached))+`)`)
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

// SLAStats are the SLA figures of the inquiries received in a stats range: how many breached a
// target, and the median and 90th percentile of the business time to first response and to
// resolution (waiting excluded), under each inquiry's policy. Inquiries received without a policy
// have no clock and are not counted.
type SLAStats struct {
	Breached              int       `json:"breached"`
	BreachedFirstResponse int       `json:"breached_first_response"`
	BreachedResolution    int       `json:"breached_resolution"`
	FirstResponse         Durations `json:"first_response"`
	Resolution            Durations `json:"resolution"`
}

// Durations summarises business-time durations in seconds (nil without any).
type Durations struct {
	Count         int      `json:"count"`
	MedianSeconds *float64 `json:"median_seconds"`
	P90Seconds    *float64 `json:"p90_seconds"`
}

func summarise(v []int64) Durations {
	d := Durations{Count: len(v)}
	if len(v) == 0 {
		return d
	}
	slices.Sort(v)
	rank := func(p float64) *float64 { // nearest rank
		i := int(math.Ceil(p*float64(len(v)))) - 1
		x := float64(v[max(i, 0)])
		return &x
	}
	d.MedianSeconds, d.P90Seconds = rank(0.5), rank(0.9)
	return d
}

// slaStats reads the clock of the tenant's inquiries received in [lo, hi) (nanoseconds).
func (r *Reader) slaStats(ctx context.Context, tenant domain.TenantID, lo, hi int64) (SLAStats, error) {
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT first_response_secs, resolution_secs, breached_targets FROM sla_clock
		WHERE tenant_id = ? AND created_at >= ? AND created_at < ? AND policy <> ''`), tenant, lo, hi)
	if err != nil {
		return SLAStats{}, fmt.Errorf("sla stats: %w", err)
	}
	defer rows.Close()
	var st SLAStats
	var fr, res []int64
	for rows.Next() {
		var f, s sql.NullInt64
		var breached string
		if err := rows.Scan(&f, &s, &breached); err != nil {
			return SLAStats{}, err
		}
		if f.Valid {
			fr = append(fr, f.Int64)
		}
		if s.Valid {
			res = append(res, s.Int64)
		}
		if breached != "" {
			st.Breached++
			for t := range strings.SplitSeq(breached, ",") {
				switch t {
				case domain.TargetFirstResponse:
					st.BreachedFirstResponse++
				case domain.TargetResolution:
					st.BreachedResolution++
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return SLAStats{}, err
	}
	st.FirstResponse, st.Resolution = summarise(fr), summarise(res)
	return st, nil
}
