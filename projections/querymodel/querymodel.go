// Package querymodel is the subscriber that builds the query API's tables: inquiries (list and
// detail) and their timeline. Every write is keyed by (tenant, inquiry, version), so applying an event
// twice changes nothing.
package querymodel

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Name is the projection's name.
const Name = "querymodel"

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS qm_inquiries (
	tenant_id       TEXT   NOT NULL,
	id              TEXT   NOT NULL,
	receipt         TEXT   NOT NULL,
	version         BIGINT NOT NULL,
	status          TEXT   NOT NULL,
	priority        TEXT   NOT NULL,
	owner           TEXT   NOT NULL DEFAULT '',
	team            TEXT   NOT NULL DEFAULT '',
	source          TEXT   NOT NULL,
	category        TEXT   NOT NULL DEFAULT '',
	subject         TEXT   NOT NULL,
	message         TEXT   NOT NULL,
	requester_name  TEXT   NOT NULL DEFAULT '',
	requester_email TEXT   NOT NULL DEFAULT '',
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL,
	closed_at       BIGINT,
	PRIMARY KEY (tenant_id, id)
);
CREATE INDEX IF NOT EXISTS qm_inquiries_list ON qm_inquiries (tenant_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS qm_inquiries_status ON qm_inquiries (tenant_id, status, created_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS qm_timeline (
	tenant_id   TEXT   NOT NULL,
	inquiry_id  TEXT   NOT NULL,
	version     BIGINT NOT NULL,
	type        TEXT   NOT NULL,
	actor       TEXT   NOT NULL,
	occurred_at BIGINT NOT NULL,
	data        TEXT   NOT NULL,
	PRIMARY KEY (tenant_id, inquiry_id, version)
)`}}

// Projection builds the query model.
type Projection struct {
	db *sqldb.DB
}

var _ projections.Projection = (*Projection)(nil)

// New returns the projection writing through db.
func New(db *sqldb.DB) *Projection { return &Projection{db: db} }

// Name implements projections.Projection.
func (p *Projection) Name() string { return Name }

// Setup implements projections.Projection.
func (p *Projection) Setup(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, Name, migrations)
}

// Apply implements projections.Projection.
func (p *Projection) Apply(ctx context.Context, tx *sql.Tx, evs []eventstore.RecordedEvent) error {
	for _, r := range evs {
		if !strings.HasPrefix(r.StreamID, "inquiry-") {
			continue
		}
		if err := p.apply(ctx, tx, r); err != nil {
			return fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
		}
	}
	return nil
}

func (p *Projection) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	_, err := tx.ExecContext(ctx, p.db.Rebind(q), args...)
	return err
}

func (p *Projection) apply(ctx context.Context, tx *sql.Tx, r eventstore.RecordedEvent) error {
	var m domain.Metadata
	if err := json.Unmarshal(r.Metadata, &m); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	e, err := domain.Decode(r.Type, m.SchemaVersion, r.Data)
	if err != nil {
		return err
	}
	tenant := string(m.TenantID)
	id, ok := strings.CutPrefix(r.StreamID, "inquiry-"+tenant+"-")
	if !ok || tenant == "" {
		return fmt.Errorf("stream does not belong to tenant %q", tenant)
	}
	version := r.Revision + 1
	at := m.OccurredAt.UnixNano()
	timeline := r.Data
	switch e := e.(type) {
	case domain.InquiryReceived:
		timeline, _ = json.Marshal(map[string]any{"source": e.Source, "category": e.Category, "priority": e.Priority})
		if err := p.exec(ctx, tx, `INSERT INTO qm_inquiries (tenant_id, id, receipt, version, status, priority, source, category,
			subject, message, requester_name, requester_email, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, id) DO NOTHING`,
			tenant, id, e.Receipt, version, domain.StatusNew, e.Priority, e.Source, e.Category,
			e.Subject, e.Message, e.Requester.Name, e.Requester.Email, at, at); err != nil {
			return err
		}
	case domain.InquiryTriaged:
		if err := p.update(ctx, tx, `status = ?, priority = ?`, tenant, id, version, at, domain.StatusTriaged, e.Priority); err != nil {
			return err
		}
	case domain.InquiryStatusChanged:
		var closed any
		if e.To.Terminal() {
			closed = at
		}
		if err := p.update(ctx, tx, `status = ?, closed_at = ?`, tenant, id, version, at, e.To, closed); err != nil {
			return err
		}
	case domain.InquiryAssigned:
		if err := p.update(ctx, tx, `owner = ?, team = ?`, tenant, id, version, at, e.Owner, e.Team); err != nil {
			return err
		}
	case domain.NoteAdded:
		if err := p.update(ctx, tx, ``, tenant, id, version, at); err != nil {
			return err
		}
	}
	return p.exec(ctx, tx, `INSERT INTO qm_timeline (tenant_id, inquiry_id, version, type, actor, occurred_at, data)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, inquiry_id, version) DO NOTHING`,
		tenant, id, version, r.Type, m.Actor, at, string(timeline))
}

// update sets columns and the version, only if the row is older than version (idempotent).
func (p *Projection) update(ctx context.Context, tx *sql.Tx, set, tenant, id string, version uint64, at int64, args ...any) error {
	if set != "" {
		set += ", "
	}
	args = append(args, version, at, tenant, id, version)
	return p.exec(ctx, tx, `UPDATE qm_inquiries SET `+set+`version = ?, updated_at = ? WHERE tenant_id = ? AND id = ? AND version < ?`, args...)
}
