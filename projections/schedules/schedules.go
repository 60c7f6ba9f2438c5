// Package schedules is the subscriber that runs Casebook's clock: it folds every inquiry with the
// domain's own fold, keeps the SLA clock of each (sla_clock: due and breach times, first response,
// escalation level, due date, next follow-up, watchers, team) and schedules the due jobs that make
// things happen when time passes (duejobs).
//
// The SLA clock is a projection of the log alone. A tenant's policy is an event (SLAPolicySet in
// slapolicy-{tenant}); an inquiry is measured by the policy in force when its InquiryReceived is
// applied, which is the same on every replay, so a rebuild computes the same due times. Breach
// times are events (SLABreached), appended by the jobs.
//
// Jobs are written in the batch's transaction with deterministic ids (inserting one that exists
// changes nothing), and pending jobs whose reason has gone (another SLA generation, a cancelled or
// fired follow-up, a closed inquiry) are cancelled there too. A rebuild (Batch.Replaying) fills the
// clock tables only: the live generation owns the jobs.
package schedules

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Name is the projection's name.
const Name = "schedules"

// Version changes whenever the tables or the computed clock change.
const Version = 1

const schema = `
CREATE TABLE IF NOT EXISTS sla_policies{g} (
	tenant_id TEXT NOT NULL PRIMARY KEY,
	policy    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sla_clock{g} (
	tenant_id             TEXT    NOT NULL,
	inquiry_id            TEXT    NOT NULL,
	version               BIGINT  NOT NULL,
	state                 TEXT    NOT NULL,
	policy                TEXT    NOT NULL DEFAULT '',
	status                TEXT    NOT NULL,
	priority              TEXT    NOT NULL,
	team                  TEXT    NOT NULL DEFAULT '',
	created_at            BIGINT  NOT NULL,
	first_response_due_at BIGINT,
	resolution_due_at     BIGINT,
	first_responded_at    BIGINT,
	first_response_secs   BIGINT,
	resolution_secs       BIGINT,
	breached              INTEGER NOT NULL DEFAULT 0,
	breached_targets      TEXT    NOT NULL DEFAULT '',
	escalation_level      INTEGER NOT NULL DEFAULT 0,
	due_at                BIGINT,
	next_follow_up_at     BIGINT,
	watchers              TEXT    NOT NULL DEFAULT '[]',
	PRIMARY KEY (tenant_id, inquiry_id)
);
CREATE INDEX IF NOT EXISTS sla_clock{g}_created ON sla_clock{g} (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS sla_clock{g}_breached ON sla_clock{g} (tenant_id, breached);
CREATE INDEX IF NOT EXISTS sla_clock{g}_due ON sla_clock{g} (tenant_id, due_at)`

// Projection is the schedules subscriber.
type Projection struct{}

var _ projections.Projection = (*Projection)(nil)

// New returns the projection.
func New() *Projection { return &Projection{} }

// Name implements projections.Projection.
func (*Projection) Name() string { return Name }

// Version implements projections.Projection.
func (*Projection) Version() int { return Version }

// Tables implements projections.Projection.
func (*Projection) Tables() []string { return []string{"sla_policies", "sla_clock"} }

// Setup implements projections.Projection.
func (*Projection) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	ddl := strings.ReplaceAll(schema, "{g}", gen.Table(""))
	return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen), []sqldb.Migration{{Version: 1, SQL: ddl}})
}

type key struct {
	tenant domain.TenantID
	id     domain.InquiryID
}

// clock is one inquiry being folded in a batch.
type clock struct {
	q      *domain.Inquiry
	policy string // the pinned policy's JSON ("" none)
	dirty  bool
	// escalate lists the SLA targets breached in this batch, at the breach event's time.
	escalate map[string]time.Time
	// jobsTouched is set by events that schedule or end follow-ups.
	jobsTouched bool
}

// Apply implements projections.Projection.
func (p *Projection) Apply(ctx context.Context, b *projections.Batch) error {
	policies := map[domain.TenantID]string{}
	clocks := map[key]*clock{}
	var order []key
	for _, e := range b.Events {
		isPolicy := strings.HasPrefix(e.StreamID, "slapolicy-")
		if !isPolicy && !strings.HasPrefix(e.StreamID, "inquiry-") {
			continue
		}
		var m domain.Metadata
		if err := json.Unmarshal(e.Metadata, &m); err != nil {
			return fmt.Errorf("%s revision %d: metadata: %w", e.StreamID, e.Revision, err)
		}
		ev, err := domain.Decode(e.Type, m.SchemaVersion, e.Data)
		if err != nil {
			return err
		}
		if isPolicy {
			set, ok := ev.(domain.SLAPolicySet)
			if !ok || e.StreamID != commands.SLAPolicyStream(m.TenantID) {
				return fmt.Errorf("%s: %s does not belong to tenant %q", e.StreamID, e.Type, m.TenantID)
			}
			if err := b.Exec(ctx, `INSERT INTO `+b.Gen.Table("sla_policies")+` (tenant_id, policy) VALUES (?, ?)
				ON CONFLICT (tenant_id) DO UPDATE SET policy = excluded.policy`, m.TenantID, string(set.Policy)); err != nil {
				return err
			}
			policies[m.TenantID] = string(set.Policy)
			continue
		}
		id, ok := eventstore.StreamInquiry("inquiry", e.StreamID, m.TenantID)
		if !ok {
			return fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
		}
		k := key{m.TenantID, id}
		c, ok := clocks[k]
		if !ok {
			if c, err = load(ctx, b, k); err != nil {
				return err
			}
			clocks[k] = c
			order = append(order, k)
		}
		if e.Revision+1 <= c.q.Version {
			continue // applied before
		}
		if _, received := ev.(domain.InquiryReceived); received {
			pol, ok := policies[k.tenant]
			if !ok {
				if pol, err = currentPolicy(ctx, b, k.tenant); err != nil {
					return err
				}
				policies[k.tenant] = pol
			}
			c.policy = pol
		} else if !c.q.Exists() {
			return fmt.Errorf("%s: event for an inquiry that was never received", e.StreamID)
		}
		c.q.Apply(ev, m.OccurredAt)
		c.dirty = true
		switch ev.(type) {
		case domain.FollowUpScheduled, domain.FollowUpCancelled, domain.FollowUpDue, domain.InquiryStatusChanged:
			c.jobsTouched = true
		}
		if br, ok := ev.(domain.SLABreached); ok {
			if c.escalate == nil {
				c.escalate = map[string]time.Time{}
			}
			c.escalate[br.Target] = m.OccurredAt
		}
	}
	for _, k := range order {
		c := clocks[k]
		if !c.dirty {
			continue
		}
		if err := p.write(ctx, b, k, c); err != nil {
			return fmt.Errorf("inquiry %s: %w", k.id, err)
		}
	}
	return nil
}

func currentPolicy(ctx context.Context, b *projections.Batch, tenant domain.TenantID) (string, error) {
	var pol string
	err := b.Tx.QueryRowContext(ctx, b.DB.Rebind(`SELECT policy FROM `+b.Gen.Table("sla_policies")+` WHERE tenant_id = ?`), tenant).Scan(&pol)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return pol, err
}

// snapshot is the stored fold: the aggregate without its personal fields.
func snapshot(q *domain.Inquiry) (string, error) {
	s := *q
	s.Requester, s.Subject, s.Message = domain.Requester{}, "", ""
	if len(q.FollowUps) > 0 {
		s.FollowUps = make(map[string]domain.FollowUp, len(q.FollowUps))
		for id, f := range q.FollowUps {
			f.Note = ""
			s.FollowUps[id] = f
		}
	}
	b, err := json.Marshal(s)
	return string(b), err
}

func load(ctx context.Context, b *projections.Batch, k key) (*clock, error) {
	var state, pol string
	err := b.Tx.QueryRowContext(ctx, b.DB.Rebind(`SELECT state, policy FROM `+b.Gen.Table("sla_clock")+` WHERE tenant_id = ? AND inquiry_id = ?`),
		k.tenant, k.id).Scan(&state, &pol)
	if errors.Is(err, sql.ErrNoRows) {
		return &clock{q: &domain.Inquiry{}}, nil
	}
	if err != nil {
		return nil, err
	}
	q := &domain.Inquiry{}
	if err := json.Unmarshal([]byte(state), q); err != nil {
		return nil, fmt.Errorf("sla clock state: %w", err)
	}
	return &clock{q: q, policy: pol}, nil
}

func nullNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func (p *Projection) write(ctx context.Context, b *projections.Batch, k key, c *clock) error {
	q := c.q
	var policy *domain.SLAPolicy
	if c.policy != "" {
		var err error
		if policy, err = domain.ParseSLAPolicy([]byte(c.policy)); err != nil {
			return fmt.Errorf("pinned policy: %w", err)
		}
	}
	var times domain.SLATimes
	var frSecs, resSecs any
	zone := "UTC"
	if policy != nil {
		times = policy.SLA(q)
		zone = policy.TimeZone
		fr, responded, res, resolved := policy.Elapsed(q)
		if responded {
			frSecs = int64(fr / time.Second)
		}
		if resolved {
			resSecs = int64(res / time.Second)
		}
	}
	state, err := snapshot(q)
	if err != nil {
		return err
	}
	watchers, _ := json.Marshal(q.Watchers)
	if q.Watchers == nil {
		watchers = []byte("[]")
	}
	breached := q.Breached()
	if err := b.Exec(ctx, `INSERT INTO `+b.Gen.Table("sla_clock")+` (tenant_id, inquiry_id, version, state, policy, status, priority, team,
		created_at, first_response_due_at, resolution_due_at, first_responded_at, first_response_secs, resolution_secs, breached,
		breached_targets, escalation_level, due_at, next_follow_up_at, watchers)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET version = excluded.version, state = excluded.state, status = excluded.status,
		priority = excluded.priority, team = excluded.team, first_response_due_at = excluded.first_response_due_at,
		resolution_due_at = excluded.resolution_due_at, first_responded_at = excluded.first_responded_at,
		first_response_secs = excluded.first_response_secs, resolution_secs = excluded.resolution_secs, breached = excluded.breached,
		breached_targets = excluded.breached_targets, escalation_level = excluded.escalation_level, due_at = excluded.due_at,
		next_follow_up_at = excluded.next_follow_up_at, watchers = excluded.watchers`,
		k.tenant, k.id, int64(q.Version), state, c.policy, string(q.Status), string(q.Priority), q.Team, q.CreatedAt.UnixNano(),
		nullNanos(times.FirstResponseDueAt), nullNanos(times.ResolutionDueAt), nullNanos(q.FirstRespondedAt), frSecs, resSecs,
		boolInt(len(breached) > 0), strings.Join(breached, ","), q.EscalationLevel, nullNanos(q.DueAt), nullNanos(q.NextFollowUpAt()),
		string(watchers)); err != nil {
		return err
	}
	if b.Replaying || (c.policy == "" && !c.jobsTouched) {
		return nil // a rebuild leaves jobs to the live generation; without a policy only follow-ups make jobs
	}
	return scheduleJobs(ctx, b, k, c, times, zone)
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// scheduleJobs makes the inquiry's pending jobs match its state.
func scheduleJobs(ctx context.Context, b *projections.Batch, k key, c *clock, times domain.SLATimes, zone string) error {
	q := c.q
	gen := strconv.FormatUint(q.SLAGeneration, 10)
	var jobs []duejobs.Job
	sla := func(kind, target string, due time.Time) {
		if due.IsZero() {
			return
		}
		if _, breached := q.Breaches[target]; breached {
			return
		}
		if w, warned := q.Warnings[target]; kind == domain.KindSLAWarning && warned && !w.Before(due) {
			return
		}
		jobs = append(jobs, duejobs.Job{ID: duejobs.JobID(string(k.tenant), string(k.id), kind, target, gen), Kind: kind, Target: target,
			DueAt: due, TimeZone: zone, PayloadClass: "internal", RecipientPolicy: "owner_watchers", Generation: q.SLAGeneration})
	}
	sla(domain.KindSLAWarning, domain.TargetFirstResponse, times.FirstResponseWarnAt)
	sla(domain.KindSLABreach, domain.TargetFirstResponse, times.FirstResponseDueAt)
	sla(domain.KindSLAWarning, domain.TargetResolution, times.ResolutionWarnAt)
	sla(domain.KindSLABreach, domain.TargetResolution, times.ResolutionDueAt)
	for id, f := range q.FollowUps {
		jobs = append(jobs, duejobs.Job{ID: id, Kind: domain.KindFollowUp, DueAt: f.DueAt, TimeZone: "UTC", PayloadClass: "personal",
			RecipientPolicy: "owner_watchers", Generation: q.Version})
	}
	for target, at := range c.escalate {
		level := q.EscalationLevel + 1
		jobs = append(jobs, duejobs.Job{ID: duejobs.JobID(string(k.tenant), string(k.id), domain.KindEscalation, target, strconv.Itoa(level)),
			Kind: domain.KindEscalation, Target: target, DueAt: at, TimeZone: zone, PayloadClass: "internal",
			RecipientPolicy: "escalation_destination", Generation: q.SLAGeneration, Level: level})
	}
	for _, j := range jobs {
		j.Tenant, j.Inquiry = k.tenant, k.id
		if err := duejobs.Schedule(ctx, b.DB, b.Tx, j, b.Now); err != nil {
			return err
		}
	}
	return duejobs.CancelPending(ctx, b.DB, b.Tx, k.tenant, k.id, domain.DueKinds, func(id string, _ uint64) bool {
		for _, j := range jobs {
			if j.ID == id {
				return true
			}
		}
		// A pending escalation stays while its inquiry is open (it decides by itself at run time).
		return !q.Status.Terminal() && isEscalation(id, k, q)
	}, "superseded", b.Now)
}

// isEscalation reports whether id is one of the inquiry's escalation job ids.
func isEscalation(id string, k key, q *domain.Inquiry) bool {
	for target := range q.Breaches {
		for level := 1; level <= q.EscalationLevel+1; level++ {
			if id == duejobs.JobID(string(k.tenant), string(k.id), domain.KindEscalation, target, strconv.Itoa(level)) {
				return true
			}
		}
	}
	return false
}
