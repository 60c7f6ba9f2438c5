package commands

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
}

var (
	_ Executor = (*Handler)(nil)
	_ Executor = (*Audited)(nil)
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
// AuditEntry. The entry is written after the command returns, so a refusal is recorded although
// nothing was appended. A failing audit write does not change the command's answer (its effect or
// refusal has already happened): it is logged at error level with the request id.
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
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	e.At = now().UTC()
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

// Intake executes and records c. A refused intake has no inquiry id.
func (a *Audited) Intake(ctx context.Context, c Intake) (IntakeResult, error) {
	res, err := a.Next.Intake(ctx, c)
	a.record(ctx, AuditEntry{RequestID: c.CorrelationID, Tenant: c.Tenant, Actor: domain.System(c.Tenant, string(c.Source)).ID,
		Command: "intake", InquiryID: res.InquiryID}, res.Replayed, err)
	return res, err
}

// Transition executes and records c.
func (a *Audited) Transition(ctx context.Context, c Transition) (Result, error) {
	res, err := a.Next.Transition(ctx, c)
	a.record(ctx, targetEntry("transition", c.Target), res.Replayed, err)
	return res, err
}

// Claim executes and records c.
func (a *Audited) Claim(ctx context.Context, c Claim) (Result, error) {
	res, err := a.Next.Claim(ctx, c)
	a.record(ctx, targetEntry("claim", c.Target), res.Replayed, err)
	return res, err
}

// Assign executes and records c.
func (a *Audited) Assign(ctx context.Context, c Assign) (Result, error) {
	res, err := a.Next.Assign(ctx, c)
	a.record(ctx, targetEntry("assign", c.Target), res.Replayed, err)
	return res, err
}

// AddNote executes and records c.
func (a *Audited) AddNote(ctx context.Context, c AddNote) (Result, error) {
	res, err := a.Next.AddNote(ctx, c)
	a.record(ctx, targetEntry("note", c.Target), res.Replayed, err)
	return res, err
}

// Cancel executes and records c.
func (a *Audited) Cancel(ctx context.Context, c Cancel) (Result, error) {
	res, err := a.Next.Cancel(ctx, c)
	a.record(ctx, targetEntry("cancel", c.Target), res.Replayed, err)
	return res, err
}

// ScheduleFollowUp executes and records c.
func (a *Audited) ScheduleFollowUp(ctx context.Context, c ScheduleFollowUp) (FollowUpResult, error) {
	res, err := a.Next.ScheduleFollowUp(ctx, c)
	a.record(ctx, targetEntry("follow_up", c.Target), res.Replayed, err)
	return res, err
}

// CancelFollowUp executes and records c.
func (a *Audited) CancelFollowUp(ctx context.Context, c CancelFollowUp) (Result, error) {
	res, err := a.Next.CancelFollowUp(ctx, c)
	a.record(ctx, targetEntry("cancel_follow_up", c.Target), res.Replayed, err)
	return res, err
}

// SetDueDate executes and records c.
func (a *Audited) SetDueDate(ctx context.Context, c SetDueDate) (Result, error) {
	res, err := a.Next.SetDueDate(ctx, c)
	a.record(ctx, targetEntry("due_date", c.Target), res.Replayed, err)
	return res, err
}

// AddWatcher executes and records c.
func (a *Audited) AddWatcher(ctx context.Context, c AddWatcher) (Result, error) {
	res, err := a.Next.AddWatcher(ctx, c)
	a.record(ctx, targetEntry("watch", c.Target), res.Replayed, err)
	return res, err
}

// Route executes and records c.
func (a *Audited) Route(ctx context.Context, c Route) (Result, error) {
	res, err := a.Next.Route(ctx, c)
	a.record(ctx, targetEntry("route", c.Target), res.Replayed, err)
	return res, err
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
// at one commit per batch rather than per command.
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
	q := l.db.Rebind(`INSERT INTO command_audit
		(request_id, tenant_id, actor, command, inquiry_id, outcome, code, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	err := sqldb.Group(ctx, l.db, func(ctx context.Context, tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, q, e.RequestID, e.Tenant, e.Actor, e.Command, e.InquiryID, e.Outcome, e.Code, e.At.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("command audit: %w", err)
	}
	return nil
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
