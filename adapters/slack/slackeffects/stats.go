package slackeffects

import (
	"context"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// KindStats is one effect kind's jobs, across tenants, for metrics.
type KindStats struct {
	Kind        string
	Queued      int // available, pending or scheduled (debounce, cooldown, circuit and scheduled removals included)
	Running     int
	Retrying    int // retryable: failed, will run again
	Dead        int // discarded: dead letters, kept until an operator acts
	Quarantined int // targets whose last outcome was a quarantine (their jobs are cancelled and kept)
	// OldestPending is the age of the oldest queued or retrying job (zero: none).
	OldestPending time.Duration
}

// GuardStats counts open circuits and running cooldowns, across tenants.
type GuardStats struct {
	DestinationCircuitsOpen  int
	InstallationCircuitsOpen int
	ManualCircuitsOpen       int // over capacity: an operator closes them
	Cooldowns                int
}

// Stats reads every registered kind's job counts and the guard's state.
func (r *Runtime) Stats(ctx context.Context) ([]KindStats, GuardStats, error) {
	kinds := r.Kinds()
	byKind := map[string]*KindStats{}
	out := make([]KindStats, len(kinds))
	for i, k := range kinds {
		out[i].Kind = k
		byKind[k] = &out[i]
	}
	var g GuardStats
	if len(kinds) == 0 {
		return out, g, nil
	}
	in := `(?` + strings.Repeat(", ?", len(kinds)-1) + `)`
	args := make([]any, len(kinds))
	for i, k := range kinds {
		args[i] = k
	}
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT kind, CAST(state AS TEXT), count(*) FROM river_job WHERE kind IN `+in+` GROUP BY kind, state`), args...)
	if err != nil {
		return nil, g, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, state string
		var n int
		if err := rows.Scan(&kind, &state, &n); err != nil {
			return nil, g, err
		}
		s := byKind[kind]
		switch rivertype.JobState(state) {
		case rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateScheduled:
			s.Queued += n
		case rivertype.JobStateRunning:
			s.Running += n
		case rivertype.JobStateRetryable:
			s.Retrying += n
		case rivertype.JobStateDiscarded:
			s.Dead += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, g, err
	}
	qrows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT kind, count(*) FROM slack_effect_health WHERE error_class = ? GROUP BY kind`), ClassQuarantined)
	if err != nil {
		return nil, g, err
	}
	defer qrows.Close()
	for qrows.Next() {
		var kind string
		var n int
		if err := qrows.Scan(&kind, &n); err != nil {
			return nil, g, err
		}
		if s := byKind[kind]; s != nil {
			s.Quarantined = n
		}
	}
	if err := qrows.Err(); err != nil {
		return nil, g, err
	}
	for i := range out {
		res, err := r.Client().JobList(ctx, river.NewJobListParams().Kinds(out[i].Kind).
			States(rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateScheduled, rivertype.JobStateRetryable).
			OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1))
		if err != nil {
			return nil, g, err
		}
		if len(res.Jobs) == 1 {
			out[i].OldestPending = max(r.Now().Sub(res.Jobs[0].CreatedAt), 0)
		}
	}
	return out, g, r.guardStats(ctx, &g)
}

func (r *Runtime) guardStats(ctx context.Context, g *GuardStats) error {
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT channel_key, circuit_open, circuit_manual, cooldown_until FROM slack_destination_health
		WHERE circuit_open = 1 OR cooldown_until > ?`), r.Now().UnixNano())
	if err != nil {
		return err
	}
	defer rows.Close()
	now := r.Now().UnixNano()
	for rows.Next() {
		var key string
		var open, manual int
		var cool int64
		if err := rows.Scan(&key, &open, &manual, &cool); err != nil {
			return err
		}
		switch {
		case open == 1 && strings.HasSuffix(key, "#*"):
			g.InstallationCircuitsOpen++
		case open == 1 && manual == 1:
			g.ManualCircuitsOpen++
		case open == 1:
			g.DestinationCircuitsOpen++
		}
		if cool > now {
			g.Cooldowns++
		}
	}
	return rows.Err()
}
