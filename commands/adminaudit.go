package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// AdminAction records one administrative action (retry a parked stream, retry an effect, close a
// circuit, revoke a token) with the reason the admin gave. Reasons are operational text, classed
// "internal" like transition reasons; they never hold requester data by design of the forms.
type AdminAction struct {
	RequestID string             `json:"request_id"`
	Tenant    domain.TenantID    `json:"tenant_id"`
	Actor     domain.PrincipalID `json:"actor"`
	Action    string             `json:"action"`
	Target    string             `json:"target"`
	Reason    string             `json:"reason"`
	Outcome   Outcome            `json:"outcome"`
	Code      string             `json:"code,omitempty"`
	At        time.Time          `json:"at"`
}

// AdminAudit stores admin actions.
type AdminAudit struct {
	db *sqldb.DB
}

// NewAdminAudit migrates the admin audit table.
func NewAdminAudit(ctx context.Context, db *sqldb.DB) (*AdminAudit, error) {
	if err := sqldb.Migrate(ctx, db, "admin_audit", []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS admin_audit (
	request_id TEXT   NOT NULL,
	tenant_id  TEXT   NOT NULL,
	actor      TEXT   NOT NULL,
	action     TEXT   NOT NULL,
	target     TEXT   NOT NULL,
	reason     TEXT   NOT NULL,
	outcome    TEXT   NOT NULL,
	code       TEXT   NOT NULL,
	at         BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS admin_audit_tenant ON admin_audit (tenant_id, at)`}}); err != nil {
		return nil, err
	}
	return &AdminAudit{db: db}, nil
}

// CheckReason validates an admin action's reason under the one text policy: required (visible),
// single-line, at most domain.MaxReasonLen characters. Run normalizes it first.
func CheckReason(reason string) error {
	if !domain.Visible(reason) {
		return domain.Invalid("reason", "is required for every admin action")
	}
	return domain.CheckText("reason", reason, true, domain.MaxReasonLen, false)
}

// Run checks the reason, runs op and records its outcome (refused, failed or accepted). A refused
// reason is recorded too, without running op.
func (a *AdminAudit) Run(ctx context.Context, e AdminAction, now time.Time, op func() error) error {
	e.Reason = Normalize(e.Reason, false)
	err := CheckReason(e.Reason)
	if err == nil {
		err = op()
	}
	e.Outcome, e.Code, e.At = OutcomeAccepted, ErrorCode(err), now.UTC()
	switch {
	case err != nil && e.Code == "internal":
		e.Outcome = OutcomeFailed
	case err != nil:
		e.Outcome = OutcomeRefused
	}
	if _, werr := a.db.ExecContext(context.WithoutCancel(ctx), a.db.Rebind(`INSERT INTO admin_audit (request_id, tenant_id, actor, action,
		target, reason, outcome, code, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`), e.RequestID, e.Tenant, e.Actor, e.Action, e.Target,
		e.Reason, e.Outcome, e.Code, e.At.UnixNano()); werr != nil {
		return fmt.Errorf("admin audit: %w", werr)
	}
	return err
}

// Recent returns a tenant's newest admin actions, newest first.
func (a *AdminAudit) Recent(ctx context.Context, tenant domain.TenantID, limit int) ([]AdminAction, error) {
	rows, err := a.db.QueryContext(ctx, a.db.Rebind(`SELECT request_id, tenant_id, actor, action, target, reason, outcome, code, at
		FROM admin_audit WHERE tenant_id = ? ORDER BY at DESC LIMIT ?`), tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("admin audit: %w", err)
	}
	defer rows.Close()
	var out []AdminAction
	for rows.Next() {
		var e AdminAction
		var at int64
		if err := rows.Scan(&e.RequestID, &e.Tenant, &e.Actor, &e.Action, &e.Target, &e.Reason, &e.Outcome, &e.Code, &at); err != nil {
			return nil, err
		}
		e.At = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
