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
	"slices"
	"sort"
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

// Version changes whenever the tables' rows or the computed clock change; a change of indexes
// is a migration (Setup).
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

// sparseIndexes (migration 2) index only breached clocks and clocks with a due date: a new
// inquiry adds to neither. The list's breached filter writes breached = 1 as a literal, which a
// planner needs to match the index's condition.
const sparseIndexes = `
DROP INDEX IF EXISTS sla_clock{g}_breached;
CREATE INDEX sla_clock{g}_breached ON sla_clock{g} (tenant_id) WHERE breached = 1;
DROP INDEX IF EXISTS sla_clock{g}_due;
CREATE INDEX sla_clock{g}_due ON sla_clock{g} (tenant_id, due_at) WHERE due_at IS NOT NULL`

// Projection is the schedules subscriber.
type Projection struct{}

var _ projections.Projection = (*Projection)(nil)

// New returns the projection.
func New() *Projection { return &Projection{} }

// Name implements projections.Projection.
func (*Projection) Name() string { return Name }

// Version implements projections.Projection.
func (*Projection) Version() int { return Version }

// ReadsPersonalData implements projections.PersonalReader: clocks and jobs keep no personal
// member (see snapshot); a follow-up's note is read when it is sent.
func (*Projection) ReadsPersonalData() bool { return false }

// Tables implements projections.Projection.
func (*Projection) Tables() []string { return []string{"sla_policies", "sla_clock"} }

// Setup implements projections.Projection.
func (*Projection) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	g := strings.NewReplacer("{g}", gen.Table(""))
	return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen), []sqldb.Migration{
		{Version: 1, SQL: g.Replace(schema)}, {Version: 2, SQL: g.Replace(sparseIndexes)}})
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
	// stored: the clock was read from the table (an inquiry received in this batch has none, and
	// no pending jobs to cancel).
	stored bool
}

// item is one decoded event of a batch.
type item struct {
	k      key
	ev     domain.Event
	m      domain.Metadata
	rev    uint64
	policy bool
}

// prepared is a decoded batch: its events, the inquiries they touch in order of first appearance,
// and which of those are received in the batch (their first event in it is InquiryReceived).
type prepared struct {
	items []item
	order []key
	fresh map[key]bool
}

var _ projections.Preparer = (*Projection)(nil)

// Prepare implements projections.Preparer: decoding needs no transaction.
func (*Projection) Prepare(evs []eventstore.RecordedEvent) (any, error) {
	p := &prepared{items: make([]item, 0, len(evs)), fresh: map[key]bool{}}
	for _, e := range evs {
		isPolicy := eventstore.KindSLAPolicy.Of(e.StreamID)
		if !isPolicy && !eventstore.KindInquiry.Of(e.StreamID) {
			continue
		}
		m, err := eventstore.DecodeMetadata(e.Metadata)
		if err != nil {
			return nil, fmt.Errorf("%s revision %d: metadata: %w", e.StreamID, e.Revision, err)
		}
		ev, err := eventstore.DecodeEvent(e.Type, m.SchemaVersion, e.Data)
		if err != nil {
			return nil, err
		}
		if isPolicy {
			if _, ok := ev.(domain.SLAPolicySet); !ok || e.StreamID != commands.SLAPolicyStream(m.TenantID) {
				return nil, fmt.Errorf("%s: %s does not belong to tenant %q", e.StreamID, e.Type, m.TenantID)
			}
			p.items = append(p.items, item{ev: ev, m: m, policy: true})
			continue
		}
		id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, e.StreamID, m.TenantID)
		if !ok {
			return nil, fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
		}
		k := key{m.TenantID, id}
		if _, seen := p.fresh[k]; !seen {
			_, received := ev.(domain.InquiryReceived)
			p.fresh[k] = received
			p.order = append(p.order, k)
		}
		p.items = append(p.items, item{k: k, ev: ev, m: m, rev: e.Revision})
	}
	return p, nil
}

// Apply implements projections.Projection. It writes in bulk: the stored clocks of the batch's
// inquiries are read with one query per chunk (an inquiry received in this batch has none and is
// not looked up), the clocks are upserted and the jobs inserted with multi-row statements, and
// the pending jobs whose reason has gone are found with one query per chunk and cancelled with
// one statement per chunk.
func (p *Projection) Apply(ctx context.Context, b *projections.Batch) error {
	pr, err := projections.PreparedOf[*prepared](b, p)
	if err != nil {
		return err
	}
	items, order, fresh := pr.items, pr.order, pr.fresh
	clocks, err := loadAll(ctx, b, order, fresh)
	if err != nil {
		return err
	}
	policies := map[domain.TenantID]string{}
	for _, it := range items {
		if it.policy {
			pol := string(it.ev.(domain.SLAPolicySet).Policy)
			if err := b.Exec(ctx, `INSERT INTO `+b.Gen.Table("sla_policies")+` (tenant_id, policy) VALUES (?, ?)
				ON CONFLICT (tenant_id) DO UPDATE SET policy = excluded.policy`, it.m.TenantID, pol); err != nil {
				return err
			}
			policies[it.m.TenantID] = pol
			continue
		}
		c := clocks[it.k]
		if it.rev+1 <= c.q.Version {
			continue // applied before
		}
		if _, received := it.ev.(domain.InquiryReceived); received {
			pol, ok := policies[it.k.tenant]
			if !ok {
				if pol, err = currentPolicy(ctx, b, it.k.tenant); err != nil {
					return err
				}
				policies[it.k.tenant] = pol
			}
			c.policy = pol
		} else if !c.q.Exists() {
			return fmt.Errorf("inquiry %s: event for an inquiry that was never received", it.k.id)
		}
		c.q.Apply(it.ev, it.m.OccurredAt)
		c.dirty = true
		switch it.ev.(type) {
		case domain.FollowUpScheduled, domain.FollowUpCancelled, domain.FollowUpDue, domain.InquiryStatusChanged,
			domain.InquiryArchived, domain.InquiryUnarchived, domain.InquiryErased:
			c.jobsTouched = true
		}
		if br, ok := it.ev.(domain.SLABreached); ok {
			if c.escalate == nil {
				c.escalate = map[string]time.Time{}
			}
			c.escalate[br.Target] = it.m.OccurredAt
		}
	}
	return p.writeAll(ctx, b, order, clocks, fresh)
}

// loadAll reads the stored clocks of keys, except those received in this batch (fresh), with one
// query per chunk; a key without a stored clock gets an empty one.
func loadAll(ctx context.Context, b *projections.Batch, keys []key, fresh map[key]bool) (map[key]*clock, error) {
	out := make(map[key]*clock, len(keys))
	var look []key
	for _, k := range keys {
		out[k] = &clock{q: &domain.Inquiry{}}
		if !fresh[k] {
			look = append(look, k)
		}
	}
	const chunk = 512
	for i := 0; i < len(look); i += chunk {
		part := look[i:min(i+chunk, len(look))]
		tenants, ids := make([]string, len(part)), make([]string, len(part))
		for j, k := range part {
			tenants[j], ids[j] = string(k.tenant), string(k.id)
		}
		from, args := b.ByKeys(b.Gen.Table("sla_clock"), "tenant_id", "inquiry_id", tenants, ids)
		err := func() error {
			rows, err := b.Query(ctx, `SELECT tenant_id, inquiry_id, state, policy FROM `+from, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k key
				var state, pol string
				if err := rows.Scan(&k.tenant, &k.id, &state, &pol); err != nil {
					return err
				}
				q, err := restore(k, state)
				if err != nil {
					return fmt.Errorf("sla clock state: %w", err)
				}
				out[k] = &clock{q: q, policy: pol, stored: true}
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func currentPolicy(ctx context.Context, b *projections.Batch, tenant domain.TenantID) (string, error) {
	var pol string
	err := b.QueryRow(ctx, `SELECT policy FROM `+b.Gen.Table("sla_policies")+` WHERE tenant_id = ?`, tenant).Scan(&pol)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return pol, err
}

// snapshot is the stored fold: the aggregate without its personal fields, its key (the row's
// tenant_id and inquiry_id) or its zero values (see clockState).
func snapshot(q *domain.Inquiry) (string, error) {
	s := *q
	s.ID, s.TenantID = "", ""
	s.Requester, s.Subject, s.Message, s.ExternalID = domain.Requester{}, "", "", ""
	if len(q.FollowUps) > 0 {
		s.FollowUps = make(map[string]domain.FollowUp, len(q.FollowUps))
		for id, f := range q.FollowUps {
			f.Note = ""
			s.FollowUps[id] = f
		}
	}
	b, err := json.Marshal(clockState(s))
	return string(b), err
}

// restore decodes a stored fold of the inquiry k.
func restore(k key, state string) (*domain.Inquiry, error) {
	var s clockState
	if err := json.Unmarshal([]byte(state), &s); err != nil {
		return nil, err
	}
	q := domain.Inquiry(s)
	q.TenantID, q.ID = k.tenant, k.id
	return &q, nil
}

// clockState is domain.Inquiry as sla_clock stores it: the same fields under the same names (the
// conversions between the two fail to compile once they differ), zero values left out. A state
// stored with every field, as earlier releases wrote it, decodes to the same inquiry.
type clockState struct {
	ID               domain.InquiryID           `json:",omitzero"`
	TenantID         domain.TenantID            `json:",omitzero"`
	Source           domain.Source              `json:",omitzero"`
	Receipt          string                     `json:",omitzero"`
	Requester        domain.Requester           `json:",omitzero"`
	Subject          string                     `json:",omitzero"`
	Message          string                     `json:",omitzero"`
	Category         string                     `json:",omitzero"`
	SubmittedBy      domain.PrincipalID         `json:",omitzero"`
	ExternalID       string                     `json:",omitzero"`
	Permalink        string                     `json:",omitzero"`
	Status           domain.Status              `json:",omitzero"`
	Priority         domain.Priority            `json:",omitzero"`
	Owner            domain.PrincipalID         `json:",omitzero"`
	Team             string                     `json:",omitzero"`
	Version          uint64                     `json:",omitzero"`
	CreatedAt        time.Time                  `json:",omitzero"`
	UpdatedAt        time.Time                  `json:",omitzero"`
	ClosedAt         time.Time                  `json:",omitzero"`
	DueAt            time.Time                  `json:",omitzero"`
	FollowUps        map[string]domain.FollowUp `json:",omitzero"`
	Watchers         []domain.PrincipalID       `json:",omitzero"`
	EscalationLevel  int                        `json:",omitzero"`
	FirstRespondedAt time.Time                  `json:",omitzero"`
	Warnings         map[string]time.Time       `json:",omitzero"`
	Breaches         map[string]time.Time       `json:",omitzero"`
	Paused           [][2]time.Time             `json:",omitzero"`
	PausedSince      time.Time                  `json:",omitzero"`
	SLAGeneration    uint64                     `json:",omitzero"`
	Archived         bool                       `json:",omitzero"`
	ArchivedAt       time.Time                  `json:",omitzero"`
	RetainUntil      time.Time                  `json:",omitzero"`
	RetentionClass   string                     `json:",omitzero"`
	Held             bool                       `json:",omitzero"`
	Erased           bool                       `json:",omitzero"`
	ErasedAt         time.Time                  `json:",omitzero"`
	NoteTimes        []time.Time                `json:",omitzero"`
	FollowUpTimes    []time.Time                `json:",omitzero"`
}

func nullNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// clockColumns are sla_clock's columns in the order rowArgs gives them (INTEGER ones as bigint).
var clockColumns, clockTypes = projections.Columns(`tenant_id text, inquiry_id text, version bigint, state text, policy text,
	status text, priority text, team text, created_at bigint, first_response_due_at bigint, resolution_due_at bigint,
	first_responded_at bigint, first_response_secs bigint, resolution_secs bigint, breached bigint, breached_targets text,
	escalation_level bigint, due_at bigint, next_follow_up_at bigint, watchers text`)

// pendingCheck is an inquiry whose stored pending jobs must match the jobs its state calls for.
type pendingCheck struct {
	k    key
	q    *domain.Inquiry
	keep map[string]bool
}

// writeAll upserts the batch's changed clocks and makes their jobs match their state, in bulk.
func (p *Projection) writeAll(ctx context.Context, b *projections.Batch, order []key, clocks map[key]*clock, fresh map[key]bool) error {
	var rows [][]any
	var jobs []duejobs.Job
	var checks []pendingCheck
	for _, k := range order {
		c := clocks[k]
		if !c.dirty {
			continue
		}
		args, times, zone, err := rowArgs(k, c)
		if err != nil {
			return fmt.Errorf("inquiry %s: %w", k.id, err)
		}
		rows = append(rows, args)
		if b.Replaying || (c.policy == "" && !c.jobsTouched) {
			continue // a rebuild leaves jobs to the live generation; without a policy only follow-ups make jobs
		}
		js := jobsFor(k, c, times, zone)
		jobs = append(jobs, js...)
		if c.stored && !fresh[k] {
			keep := make(map[string]bool, len(js))
			for _, j := range js {
				keep[j.ID] = true
			}
			checks = append(checks, pendingCheck{k: k, q: c.q, keep: keep})
		}
	}
	if err := upsertClocks(ctx, b, rows); err != nil {
		return err
	}
	if err := duejobs.ScheduleMany(ctx, b.DB, b.Tx, jobs, b.Now); err != nil {
		return err
	}
	return cancelGone(ctx, b, checks)
}

// upsertClocks writes clock rows with multi-row upserts, sent with the batch's commit (the batch
// reads no clock after writing it); a stored clock never moves back to an older version.
func upsertClocks(ctx context.Context, b *projections.Batch, rows [][]any) error {
	table := b.Gen.Table("sla_clock")
	args := make([]any, 0, len(clockTypes)*len(rows))
	for _, r := range rows {
		args = append(args, r...)
	}
	return b.ExecRowsAtCommit(ctx, `INSERT INTO `+table+` (`+clockColumns+`)`, `
		ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET version = excluded.version, state = excluded.state, status = excluded.status,
		priority = excluded.priority, team = excluded.team, first_response_due_at = excluded.first_response_due_at,
		resolution_due_at = excluded.resolution_due_at, first_responded_at = excluded.first_responded_at,
		first_response_secs = excluded.first_response_secs, resolution_secs = excluded.resolution_secs, breached = excluded.breached,
		breached_targets = excluded.breached_targets, escalation_level = excluded.escalation_level, due_at = excluded.due_at,
		next_follow_up_at = excluded.next_follow_up_at, watchers = excluded.watchers WHERE `+table+`.version < excluded.version`, clockTypes, args)
}

// rowArgs computes an inquiry's clock row (clockColumns), its SLA times and their zone.
func rowArgs(k key, c *clock) ([]any, domain.SLATimes, string, error) {
	q := c.q
	var policy *domain.SLAPolicy
	if c.policy != "" {
		var err error
		if policy, err = domain.ParseSLAPolicy([]byte(c.policy)); err != nil {
			return nil, domain.SLATimes{}, "", fmt.Errorf("pinned policy: %w", err)
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
		return nil, domain.SLATimes{}, "", err
	}
	watchers, _ := json.Marshal(q.Watchers)
	if q.Watchers == nil {
		watchers = []byte("[]")
	}
	breached := q.Breached()
	return []any{k.tenant, k.id, int64(q.Version), state, c.policy, string(q.Status), string(q.Priority), q.Team, q.CreatedAt.UnixNano(),
		nullNanos(times.FirstResponseDueAt), nullNanos(times.ResolutionDueAt), nullNanos(q.FirstRespondedAt), frSecs, resSecs,
		boolInt(len(breached) > 0), strings.Join(breached, ","), q.EscalationLevel, nullNanos(q.DueAt), nullNanos(q.NextFollowUpAt()),
		string(watchers)}, times, zone, nil
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// jobsFor lists the jobs an inquiry's state calls for, under deterministic ids.
func jobsFor(k key, c *clock, times domain.SLATimes, zone string) []duejobs.Job {
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
	ids := make([]string, 0, len(q.FollowUps))
	for id := range q.FollowUps {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a stable statement order
	for _, id := range ids {
		jobs = append(jobs, duejobs.Job{ID: id, Kind: domain.KindFollowUp, DueAt: q.FollowUps[id].DueAt, TimeZone: "UTC", PayloadClass: "personal",
			RecipientPolicy: "owner_watchers", Generation: q.Version})
	}
	targets := make([]string, 0, len(c.escalate))
	for target := range c.escalate {
		targets = append(targets, target)
	}
	sort.Strings(targets)
	for _, target := range targets {
		level := q.EscalationLevel + 1
		jobs = append(jobs, duejobs.Job{ID: duejobs.JobID(string(k.tenant), string(k.id), domain.KindEscalation, target, strconv.Itoa(level)),
			Kind: domain.KindEscalation, Target: target, DueAt: c.escalate[target], TimeZone: zone, PayloadClass: "internal",
			RecipientPolicy: "escalation_destination", Generation: q.SLAGeneration, Level: level})
	}
	for i := range jobs {
		jobs[i].Tenant, jobs[i].Inquiry = k.tenant, k.id
	}
	return jobs
}

// cancelGone cancels the pending jobs of the checked inquiries that their state no longer calls
// for (another SLA generation, a cancelled or fired follow-up, a closed inquiry). A pending
// escalation stays while its inquiry is open: it decides by itself when it runs.
func cancelGone(ctx context.Context, b *projections.Batch, checks []pendingCheck) error {
	if len(checks) == 0 {
		return nil
	}
	keys := make([]duejobs.InquiryKey, len(checks))
	for i, c := range checks {
		keys[i] = duejobs.InquiryKey{Tenant: c.k.tenant, Inquiry: c.k.id}
	}
	pending, err := duejobs.PendingOf(ctx, b.DB, b.Tx, keys)
	if err != nil {
		return err
	}
	var cancel []string
	for i, c := range checks {
		for _, j := range pending[keys[i]] {
			if slices.Contains(domain.DueKinds, j.Kind) && !c.keep[j.ID] && (c.q.Status.Terminal() || c.q.Archived || c.q.Erased || !isEscalation(j.ID, c.k, c.q)) {
				cancel = append(cancel, j.ID)
			}
		}
	}
	return duejobs.CancelIDs(ctx, b.DB, b.Tx, cancel, "superseded", b.Now)
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
