package commands

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// Executor runs commands. *Handler executes them; *Audited records every one around another
// Executor. Adapters depend on Executor, so they cannot bypass the audit.
type Executor interface {
	Intake(context.Context, Intake) (IntakeResult, error)
	Transition(context.Context, Transition) (Result, error)
	Claim(context.Context, Claim) (Result, error)
	Assign(context.Context, Assign) (Result, error)
	AddNote(context.Context, AddNote) (Result, error)
	Cancel(context.Context, Cancel) (Result, error)
	ScheduleFollowUp(context.Context, ScheduleFollowUp) (FollowUpResult, error)
	CancelFollowUp(context.Context, CancelFollowUp) (Result, error)
	SetDueDate(context.Context, SetDueDate) (Result, error)
	AddWatcher(context.Context, AddWatcher) (Result, error)
	Route(context.Context, Route) (Result, error)
	SetSLAPolicy(context.Context, SetSLAPolicy) (*domain.SLAPolicy, eventstore.Position, error)
	Archive(context.Context, Archive) (Result, error)
	Unarchive(context.Context, Unarchive) (Result, error)
	Hold(context.Context, Hold) (Result, error)
	Erase(context.Context, Erase) (Result, error)
	SetRetentionPolicy(context.Context, SetRetentionPolicy) (*domain.RetentionPolicy, eventstore.Position, error)
	RetentionErase(context.Context, RetentionErase) (RetentionOutcome, Result, error)
}

var (
	_ Executor          = (*Handler)(nil)
	_ Executor          = (*Audited)(nil)
	_ CompanionRecorder = (*AuditLog)(nil)
)

// Outcome is what became of a command.
type Outcome string

// The outcomes. A refused command was decided against (role, team, tenant, lifecycle, validation,
// version); a failed one hit an internal error; neither appended anything.
const (
	OutcomeAccepted Outcome = "accepted"
	OutcomeReplayed Outcome = "replayed"
	OutcomeRefused  Outcome = "refused"
	OutcomeFailed   Outcome = "failed"
)

// AuditEntry records one command. It holds ids, names and codes only, never personal data: no
// requester fields, subjects, messages, notes or reasons.
type AuditEntry struct {
	RequestID string             `json:"request_id"` // the opaque correlation id (HTTP request id)
	Tenant    domain.TenantID    `json:"tenant_id"`
	Actor     domain.PrincipalID `json:"actor"`
	Command   string             `json:"command"`
	InquiryID domain.InquiryID   `json:"inquiry_id,omitempty"`
	Outcome   Outcome            `json:"outcome"`
	Code      string             `json:"code,omitempty"` // ErrorCode of a refusal or failure
	At        time.Time          `json:"at"`
}

// AuditSink stores audit entries.
type AuditSink interface {
	Record(ctx context.Context, e AuditEntry) error
}

// Audited decorates an Executor: every command it passes on, accepted or refused, leaves one
// AuditEntry. An accepted command's entry is written in its append's transaction when the sink is a
// CompanionRecorder on the event store's database (then an entry that cannot be written fails the append,
// so nothing is accepted without it); otherwise, and for refusals and replays, the entry is written
// after the command returns, and a failing write does not change the command's answer (its effect
// or refusal has already happened): it is logged at error level with the request id.
type Audited struct {
	Next   Executor
	Sink   AuditSink
	Now    func() time.Time
	Logger *slog.Logger
}

func (a *Audited) record(ctx context.Context, e AuditEntry, replayed bool, err error) {
	e.Outcome, e.Code = OutcomeAccepted, ErrorCode(err)
	switch {
	case err != nil && e.Code == "internal":
		e.Outcome = OutcomeFailed
	case err != nil:
		e.Outcome = OutcomeRefused
	case replayed:
		e.Outcome = OutcomeReplayed
	}
	e.At = a.now()
	// The caller may be gone (a client hung up); the record is written regardless.
	if werr := a.Sink.Record(context.WithoutCancel(ctx), e); werr != nil {
		log := a.Logger
		if log == nil {
			log = slog.Default()
		}
		log.ErrorContext(ctx, "audit write failed", "request_id", e.RequestID, "command", e.Command,
			"outcome", string(e.Outcome), "err", werr)
	}
}

func targetEntry(command string, t Target) AuditEntry {
	return AuditEntry{RequestID: t.CorrelationID, Tenant: t.Tenant, Actor: t.Actor.ID, Command: command, InquiryID: t.InquiryID}
}

// appender is an Executor whose appends can carry options (*Handler).
type appender interface {
	AppendingWith(opts ...eventstore.AppendOption) Executor
}

// withEntry returns a.Next with its appends carrying e, as accepted, for the command's append to
// write in its own transaction (an eventstore.Companion) when the sink and the event store share a
// database, and a flag set once it did. An entry that cannot be written there fails the append:
// nothing is accepted without its entry. When the sink is no CompanionRecorder, or Next takes no
// append options, it returns a.Next, and the entry is recorded after the command.
func (a *Audited) withEntry(e AuditEntry) (Executor, *atomic.Bool) {
	wrote := new(atomic.Bool)
	cr, ok := a.Sink.(CompanionRecorder)
	next, takes := a.Next.(appender)
	if !ok || !takes {
		return a.Next, wrote
	}
	return next.AppendingWith(eventstore.WithCompanions(cr.Companion(func(stream string) AuditEntry {
		e := e
		if e.InquiryID == "" {
			e.InquiryID, _ = eventstore.StreamInquiry(eventstore.KindInquiry, stream, e.Tenant)
		}
		e.Outcome, e.At = OutcomeAccepted, a.now()
		return e
	}, func() { wrote.Store(true) }))), wrote
}

// CompanionRecorder is an AuditSink whose entry of an accepted command an event store on the sink's
// database writes in the append's own transaction (an eventstore.Companion).
type CompanionRecorder interface {
	Companion(entry func(stream string) AuditEntry, written func()) *eventstore.Companion
}

// finish records e unless its hook wrote it with the command's committed append.
func (a *Audited) finish(ctx context.Context, e AuditEntry, wrote *atomic.Bool, replayed bool, err error) {
	if err == nil && !replayed && wrote.Load() {
		return
	}
	a.record(ctx, e, replayed, err)
}

func (a *Audited) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// Intake executes and records c. A refused intake has no inquiry id.
func (a *Audited) Intake(ctx context.Context, c Intake) (IntakeResult, error) {
	e := AuditEntry{RequestID: c.CorrelationID, Tenant: c.Tenant, Actor: domain.System(c.Tenant, string(c.Source)).ID, Command: "intake"}
	if c.Submitter != nil {
		e.Actor = c.Submitter.ID
	}
	next, wrote := a.withEntry(e)
	res, err := next.Intake(ctx, c)
	e.InquiryID = res.InquiryID
	a.finish(ctx, e, wrote, res.Replayed, err)
	return res, err
}

// target executes one command on an existing inquiry and records it.
func (a *Audited) target(ctx context.Context, command string, t Target, run func(Executor) (Result, error)) (Result, error) {
	e := targetEntry(command, t)
	next, wrote := a.withEntry(e)
	res, err := run(next)
	a.finish(ctx, e, wrote, res.Replayed, err)
	return res, err
}

// Transition executes and records c.
func (a *Audited) Transition(ctx context.Context, c Transition) (Result, error) {
	return a.target(ctx, "transition", c.Target, func(next Executor) (Result, error) { return next.Transition(ctx, c) })
}

// Claim executes and records c.
func (a *Audited) Claim(ctx context.Context, c Claim) (Result, error) {
	return a.target(ctx, "claim", c.Target, func(next Executor) (Result, error) { return next.Claim(ctx, c) })
}

// Assign executes and records c.
func (a *Audited) Assign(ctx context.Context, c Assign) (Result, error) {
	return a.target(ctx, "assign", c.Target, func(next Executor) (Result, error) { return next.Assign(ctx, c) })
}

// AddNote executes and records c.
func (a *Audited) AddNote(ctx context.Context, c AddNote) (Result, error) {
	return a.target(ctx, "note", c.Target, func(next Executor) (Result, error) { return next.AddNote(ctx, c) })
}

// Cancel executes and records c.
func (a *Audited) Cancel(ctx context.Context, c Cancel) (Result, error) {
	return a.target(ctx, "cancel", c.Target, func(next Executor) (Result, error) { return next.Cancel(ctx, c) })
}

// ScheduleFollowUp executes and records c.
func (a *Audited) ScheduleFollowUp(ctx context.Context, c ScheduleFollowUp) (FollowUpResult, error) {
	var out FollowUpResult
	_, err := a.target(ctx, "follow_up", c.Target, func(next Executor) (Result, error) {
		var err error
		out, err = next.ScheduleFollowUp(ctx, c)
		return out.Result, err
	})
	return out, err
}

// CancelFollowUp executes and records c.
func (a *Audited) CancelFollowUp(ctx context.Context, c CancelFollowUp) (Result, error) {
	return a.target(ctx, "cancel_follow_up", c.Target, func(next Executor) (Result, error) { return next.CancelFollowUp(ctx, c) })
}

// SetDueDate executes and records c.
func (a *Audited) SetDueDate(ctx context.Context, c SetDueDate) (Result, error) {
	return a.target(ctx, "due_date", c.Target, func(next Executor) (Result, error) { return next.SetDueDate(ctx, c) })
}

// AddWatcher executes and records c.
func (a *Audited) AddWatcher(ctx context.Context, c AddWatcher) (Result, error) {
	return a.target(ctx, "watch", c.Target, func(next Executor) (Result, error) { return next.AddWatcher(ctx, c) })
}

// Route executes and records c.
func (a *Audited) Route(ctx context.Context, c Route) (Result, error) {
	return a.target(ctx, "route", c.Target, func(next Executor) (Result, error) { return next.Route(ctx, c) })
}

// SetSLAPolicy executes and records c.
func (a *Audited) SetSLAPolicy(ctx context.Context, c SetSLAPolicy) (*domain.SLAPolicy, eventstore.Position, error) {
	p, pos, err := a.Next.SetSLAPolicy(ctx, c)
	a.record(ctx, AuditEntry{RequestID: c.CorrelationID, Tenant: c.Tenant, Actor: c.Actor.ID, Command: "sla_policy"}, false, err)
	return p, pos, err
}

var auditMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS command_audit (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	request_id TEXT   NOT NULL,
	tenant_id  TEXT   NOT NULL,
	actor      TEXT   NOT NULL,
	command    TEXT   NOT NULL,
	inquiry_id TEXT   NOT NULL,
	outcome    TEXT   NOT NULL,
	code       TEXT   NOT NULL,
	at         BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS command_audit_tenant ON command_audit (tenant_id, seq)`,
	Postgres: `
CREATE TABLE IF NOT EXISTS command_audit (
	seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	request_id TEXT   NOT NULL,
	tenant_id  TEXT   NOT NULL,
	actor      TEXT   NOT NULL,
	command    TEXT   NOT NULL,
	inquiry_id TEXT   NOT NULL,
	outcome    TEXT   NOT NULL,
	code       TEXT   NOT NULL,
	at         BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS command_audit_tenant ON command_audit (tenant_id, seq)`}}

// AuditLog is the command_audit table on SQLite or Postgres. Entries are only ever inserted.
//
// Record group-commits (sqldb.Group): concurrent calls share one transaction, together with the
// event appends of the embedded store that are waiting at the same time, and each returns once the
// transaction holding its entry has committed. So an entry is durable before the command's answer,
// at one commit per batch rather than per command. When the event store shares the log's database
// (the embedded mode, or the Postgres event store on the same pool), an accepted command's entry is
// written by its append instead (Companion) and costs no commit of its own.
type AuditLog struct {
	db *sqldb.DB
}

// NewAuditLog migrates command_audit and returns the log.
func NewAuditLog(ctx context.Context, db *sqldb.DB) (*AuditLog, error) {
	if err := sqldb.Migrate(ctx, db, "command_audit", auditMigrations); err != nil {
		return nil, err
	}
	return &AuditLog{db: db}, nil
}

// Record inserts e and returns once it is committed.
func (l *AuditLog) Record(ctx context.Context, e AuditEntry) error {
	err := sqldb.Group(ctx, l.db, func(ctx context.Context, tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, l.db.Rebind(`INSERT INTO command_audit (`+strings.Join(auditColumns, ", ")+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), auditValues(e)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("command audit: %w", err)
	}
	return nil
}

var auditColumns = []string{"request_id", "tenant_id", "actor", "command", "inquiry_id", "outcome", "code", "at"}

func auditValues(e AuditEntry) []any {
	return []any{e.RequestID, string(e.Tenant), string(e.Actor), e.Command, string(e.InquiryID), string(e.Outcome), e.Code, e.At.UnixNano()}
}

// Companion implements CompanionRecorder: the entry as a row of the append of an event store on the
// log's database.
func (l *AuditLog) Companion(entry func(stream string) AuditEntry, written func()) *eventstore.Companion {
	return &eventstore.Companion{Handle: l.db.CompanionHandle(), Table: "command_audit", Columns: auditColumns,
		Values: func(stream string) []any { return auditValues(entry(stream)) }, Written: written}
}

// Entries returns a tenant's most recent entries (at most limit), oldest first.
func (l *AuditLog) Entries(ctx context.Context, tenant domain.TenantID, limit int) ([]AuditEntry, error) {
	rows, err := l.db.QueryContext(ctx, l.db.Rebind(`SELECT request_id, tenant_id, actor, command, inquiry_id, outcome, code, at
		FROM command_audit WHERE tenant_id = ? ORDER BY seq DESC LIMIT ?`), tenant, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.RequestID, &e.Tenant, &e.Actor, &e.Command, &e.InquiryID, &e.Outcome, &e.Code, &at); err != nil {
			return nil, err
		}
		e.At = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// Archive executes and records c.
func (a *Audited) Archive(ctx context.Context, c Archive) (Result, error) {
	return a.target(ctx, "archive", c.Target, func(next Executor) (Result, error) { return next.Archive(ctx, c) })
}

// Unarchive executes and records c.
func (a *Audited) Unarchive(ctx context.Context, c Unarchive) (Result, error) {
	return a.target(ctx, "unarchive", c.Target, func(next Executor) (Result, error) { return next.Unarchive(ctx, c) })
}

// Hold executes and records c.
func (a *Audited) Hold(ctx context.Context, c Hold) (Result, error) {
	name := "hold"
	if c.Release {
		name = "release_hold"
	}
	return a.target(ctx, name, c.Target, func(next Executor) (Result, error) { return next.Hold(ctx, c) })
}

// Erase executes and records c.
func (a *Audited) Erase(ctx context.Context, c Erase) (Result, error) {
	return a.target(ctx, "erase", c.Target, func(next Executor) (Result, error) { return next.Erase(ctx, c) })
}
