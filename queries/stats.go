package queries

import (
	"context"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
)

// Day is one UTC day's intake and closures.
type Day struct {
	Day      string `json:"day"` // YYYY-MM-DD, UTC
	Received int    `json:"received"`
	Closed   int    `json:"closed"`
}

// Stats are a tenant's figures. Days covers From..To (UTC days, both included, zeros too);
// ByStatus and OpenByPriority count the tenant's inquiries as they are now.
type Stats struct {
	From           string                  `json:"from"`
	To             string                  `json:"to"`
	Days           []Day                   `json:"days"`
	Received       int                     `json:"received"`
	Closed         int                     `json:"closed"`
	ByStatus       map[domain.Status]int   `json:"by_status"`
	OpenByPriority map[domain.Priority]int `json:"open_by_priority"`
	// SLA covers the inquiries received in the range (see SLAStats).
	SLA SLAStats `json:"sla"`
}

// MaxStatsDays bounds a stats range.
const MaxStatsDays = 366

const dayLayout = "2006-01-02"

// StatsRange parses a stats range of UTC dates (YYYY-MM-DD, both included). Empty from/to default
// to the 30 days ending today. A range that is reversed or longer than MaxStatsDays is invalid.
func StatsRange(from, to string, now time.Time) (time.Time, time.Time, error) {
	end := now.UTC().Truncate(24 * time.Hour)
	if to != "" {
		t, err := time.Parse(dayLayout, to)
		if err != nil {
			return time.Time{}, time.Time{}, domain.Invalid("to", "must be a date as YYYY-MM-DD")
		}
		end = t
	}
	start := end.AddDate(0, 0, -29)
	if from != "" {
		t, err := time.Parse(dayLayout, from)
		if err != nil {
			return time.Time{}, time.Time{}, domain.Invalid("from", "must be a date as YYYY-MM-DD")
		}
		start = t
	}
	if start.After(end) {
		return time.Time{}, time.Time{}, domain.Invalid("from", "must not be after to")
	}
	if end.Sub(start) >= MaxStatsDays*24*time.Hour {
		return time.Time{}, time.Time{}, domain.Invalid("to", "the range is at most %d days", MaxStatsDays)
	}
	return start, end, nil
}

// Stats computes the tenant's figures for the UTC days from..to (see StatsRange).
func (r *Reader) Stats(ctx context.Context, tenant domain.TenantID, from, to time.Time) (Stats, error) {
	from, to = from.UTC().Truncate(24*time.Hour), to.UTC().Truncate(24*time.Hour)
	st := Stats{From: from.Format(dayLayout), To: to.Format(dayLayout), ByStatus: map[domain.Status]int{},
		OpenByPriority: map[domain.Priority]int{}}
	index := map[int64]int{}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		index[d.UnixNano()/int64(24*time.Hour)] = len(st.Days)
		st.Days = append(st.Days, Day{Day: d.Format(dayLayout)})
	}
	lo, hi := from.UnixNano(), to.AddDate(0, 0, 1).UnixNano()
	for col, add := range map[string]func(*Day, int){
		"created_at": func(d *Day, n int) { d.Received += n },
		"closed_at":  func(d *Day, n int) { d.Closed += n },
	} {
		err := r.perDay(ctx, tenant, col, lo, hi, func(d int64, n int) {
			if i, ok := index[d]; ok {
				add(&st.Days[i], n)
			}
		})
		if err != nil {
			return Stats{}, err
		}
	}
	for _, d := range st.Days {
		st.Received += d.Received
		st.Closed += d.Closed
	}
	var err error
	if st.SLA, err = r.slaStats(ctx, tenant, lo, hi); err != nil {
		return Stats{}, err
	}
	for _, s := range domain.Statuses {
		st.ByStatus[s] = 0
	}
	for _, p := range domain.Priorities {
		st.OpenByPriority[p] = 0
	}
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT status, priority, count(*) FROM qm_inquiries WHERE tenant_id = ?
		GROUP BY status, priority`), tenant)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s domain.Status
		var p domain.Priority
		var n int
		if err := rows.Scan(&s, &p, &n); err != nil {
			return Stats{}, err
		}
		st.ByStatus[s] += n
		if !s.Terminal() {
			st.OpenByPriority[p] += n
		}
	}
	return st, rows.Err()
}

// perDay counts the tenant's inquiries by the UTC day of col (a time column) in [lo, hi).
func (r *Reader) perDay(ctx context.Context, tenant domain.TenantID, col string, lo, hi int64, add func(day int64, n int)) error {
	const day = int64(24 * time.Hour)
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(fmt.Sprintf(`SELECT %[1]s / %[2]d, count(*) FROM qm_inquiries
		WHERE tenant_id = ? AND %[1]s >= ? AND %[1]s < ? GROUP BY %[1]s / %[2]d`, col, day)), tenant, lo, hi)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d int64
		var n int
		if err := rows.Scan(&d, &n); err != nil {
			return err
		}
		add(d, n)
	}
	return rows.Err()
}

// Counts returns the tenant's inquiries per status (every status, zeros included).
func (r *Reader) Counts(ctx context.Context, tenant domain.TenantID) (map[domain.Status]int, error) {
	out := make(map[domain.Status]int, len(domain.Statuses))
	for _, s := range domain.Statuses {
		out[s] = 0
	}
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT status, count(*) FROM qm_inquiries WHERE tenant_id = ? GROUP BY status`), tenant)
	if err != nil {
		return nil, fmt.Errorf("counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s domain.Status
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] += n
	}
	return out, rows.Err()
}

// Changed returns a token that changes whenever any of the tenant's inquiries changes: the number
// of inquiries and the sum of their versions (every event raises one). The console's live updates
// poll it.
func (r *Reader) Changed(ctx context.Context, tenant domain.TenantID) (string, error) {
	var n, latest int64
	err := r.DB.QueryRowContext(ctx, r.DB.Rebind(`SELECT count(*), coalesce(sum(version), 0) FROM qm_inquiries WHERE tenant_id = ?`),
		tenant).Scan(&n, &latest)
	if err != nil {
		return "", fmt.Errorf("changed: %w", err)
	}
	return fmt.Sprintf("%d.%d", latest, n), nil
}
