// Package querymodel is the subscriber that builds the query API's tables: inquiries (list and
// detail) and their timeline. It folds each batch in memory and writes it with multi-row
// statements; every write is keyed by (tenant, inquiry, version), so applying an event twice
// changes nothing.
package querymodel

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Name is the projection's name.
const Name = "querymodel"

// Version must change whenever the tables below or the handler's output change; a deployment then
// rebuilds the query model before serving it (casebook replay --projection querymodel).
const Version = 1

// schema is the DDL of one generation; {g} is the generation suffix.
const schema = `
CREATE TABLE IF NOT EXISTS qm_inquiries{g} (
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
CREATE INDEX IF NOT EXISTS qm_inquiries{g}_list ON qm_inquiries{g} (tenant_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS qm_inquiries{g}_status ON qm_inquiries{g} (tenant_id, status, created_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS qm_timeline{g} (
	tenant_id   TEXT   NOT NULL,
	inquiry_id  TEXT   NOT NULL,
	version     BIGINT NOT NULL,
	type        TEXT   NOT NULL,
	actor       TEXT   NOT NULL,
	occurred_at BIGINT NOT NULL,
	data        TEXT   NOT NULL,
	PRIMARY KEY (tenant_id, inquiry_id, version)
)`

// Projection builds the query model.
type Projection struct{}

var _ projections.Projection = (*Projection)(nil)

// New returns the projection.
func New() *Projection { return &Projection{} }

// Name implements projections.Projection.
func (*Projection) Name() string { return Name }

// Version implements projections.Projection.
func (*Projection) Version() int { return Version }

// Tables implements projections.Projection.
func (*Projection) Tables() []string { return []string{"qm_inquiries", "qm_timeline"} }

// Setup implements projections.Projection.
func (*Projection) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	ddl := strings.ReplaceAll(schema, "{g}", gen.Table(""))
	return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen), []sqldb.Migration{{Version: 1, SQL: ddl}})
}

// row is an inquiry row being folded.
type row struct {
	tenant, id, receipt                        string
	version                                    uint64
	status, priority, owner, team, source, cat string
	subject, message, name, email              string
	created, updated                           int64
	closed                                     sql.NullInt64
	dirty                                      bool
}

type key struct{ tenant, id string }

type timelineRow struct {
	tenant, id string
	version    uint64
	typ, actor string
	at         int64
	data       string
}

type decoded struct {
	key     key
	version uint64
	meta    domain.Metadata
	event   domain.Event
	typ     string
	data    []byte
}

// Apply implements projections.Projection.
func (*Projection) Apply(ctx context.Context, b *projections.Batch) error {
	var evs []decoded
	keys := map[key]bool{}
	for _, r := range b.Events {
		if !strings.HasPrefix(r.StreamID, "inquiry-") {
			continue
		}
		d, err := decode(r)
		if err != nil {
			return fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
		}
		evs = append(evs, d)
		keys[d.key] = true
	}
	if len(evs) == 0 {
		return nil
	}
	inq := b.Gen.Table("qm_inquiries")
	rows, err := load(ctx, b, inq, keys)
	if err != nil {
		return err
	}
	timeline := make([]timelineRow, 0, len(evs))
	for _, d := range evs {
		tl, err := fold(rows, d)
		if err != nil {
			return fmt.Errorf("inquiry %s version %d: %w", d.key.id, d.version, err)
		}
		timeline = append(timeline, tl)
	}
	if err := upsert(ctx, b, inq, rows); err != nil {
		return err
	}
	return insertTimeline(ctx, b, b.Gen.Table("qm_timeline"), timeline)
}

func decode(r eventstore.RecordedEvent) (decoded, error) {
	var m domain.Metadata
	if err := json.Unmarshal(r.Metadata, &m); err != nil {
		return decoded{}, fmt.Errorf("metadata: %w", err)
	}
	e, err := domain.Decode(r.Type, m.SchemaVersion, r.Data)
	if err != nil {
		return decoded{}, err
	}
	tenant := string(m.TenantID)
	id, ok := strings.CutPrefix(r.StreamID, "inquiry-"+tenant+"-")
	if !ok || tenant == "" {
		return decoded{}, fmt.Errorf("stream does not belong to tenant %q", tenant)
	}
	return decoded{key: key{tenant, id}, version: r.Revision + 1, meta: m, event: e, typ: r.Type, data: r.Data}, nil
}

// errNoInquiry: an event for an inquiry whose first event was not applied (its stream parks).
var errNoInquiry = errors.New("event for an inquiry that was never received")

// fold applies one event to the rows and returns its timeline entry. Events at or below a row's
// version were applied before and change nothing.
func fold(rows map[key]*row, d decoded) (timelineRow, error) {
	at := d.meta.OccurredAt.UnixNano()
	tl := timelineRow{tenant: d.key.tenant, id: d.key.id, version: d.version, typ: d.typ, actor: string(d.meta.Actor), at: at, data: string(d.data)}
	r := rows[d.key]
	if e, ok := d.event.(domain.InquiryReceived); ok {
		b, _ := json.Marshal(map[string]any{"source": e.Source, "category": e.Category, "priority": e.Priority})
		tl.data = string(b) // personal fields stay on the detail row
		if r == nil {
			rows[d.key] = &row{tenant: d.key.tenant, id: d.key.id, receipt: e.Receipt, version: d.version,
				status: string(domain.StatusNew), priority: string(e.Priority), source: string(e.Source), cat: e.Category,
				subject: e.Subject, message: e.Message, name: e.Requester.Name, email: e.Requester.Email,
				created: at, updated: at, dirty: true}
		}
		return tl, nil
	}
	if r == nil {
		return tl, errNoInquiry
	}
	if d.version <= r.version {
		return tl, nil
	}
	switch e := d.event.(type) {
	case domain.InquiryTriaged:
		r.status, r.priority = string(domain.StatusTriaged), string(e.Priority)
	case domain.InquiryStatusChanged:
		r.status = string(e.To)
		r.closed = sql.NullInt64{Int64: at, Valid: e.To.Terminal()}
	case domain.InquiryAssigned:
		r.owner, r.team = string(e.Owner), e.Team
	case domain.NoteAdded:
	}
	r.version, r.updated, r.dirty = d.version, at, true
	return tl, nil
}

const inquiryCols = `tenant_id, id, receipt, version, status, priority, owner, team, source, category, subject, message,
	requester_name, requester_email, created_at, updated_at, closed_at`

// load reads the existing rows of the inquiries a batch touches.
func load(ctx context.Context, b *projections.Batch, table string, keys map[key]bool) (map[key]*row, error) {
	out := make(map[key]*row, len(keys))
	all := make([]key, 0, len(keys))
	for k := range keys {
		all = append(all, k)
	}
	const chunk = 400
	for i := 0; i < len(all); i += chunk {
		part := all[i:min(i+chunk, len(all))]
		args := make([]any, 0, 2*len(part))
		for _, k := range part {
			args = append(args, k.tenant, k.id)
		}
		q := `SELECT ` + inquiryCols + ` FROM ` + table + ` WHERE (tenant_id, id) IN (VALUES ` + placeholders(len(part), 2) + `)`
		if err := loadChunk(ctx, b, q, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func loadChunk(ctx context.Context, b *projections.Batch, q string, args []any, out map[key]*row) error {
	rs, err := b.Tx.QueryContext(ctx, b.DB.Rebind(q), args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		r := &row{}
		if err := rs.Scan(&r.tenant, &r.id, &r.receipt, &r.version, &r.status, &r.priority, &r.owner, &r.team, &r.source,
			&r.cat, &r.subject, &r.message, &r.name, &r.email, &r.created, &r.updated, &r.closed); err != nil {
			return err
		}
		out[key{r.tenant, r.id}] = r
	}
	return rs.Err()
}

// upsert writes the changed rows; a row never moves to an older version.
func upsert(ctx context.Context, b *projections.Batch, table string, rows map[key]*row) error {
	var dirty []*row
	for _, r := range rows {
		if r.dirty {
			dirty = append(dirty, r)
		}
	}
	const chunk = 200
	for i := 0; i < len(dirty); i += chunk {
		part := dirty[i:min(i+chunk, len(dirty))]
		args := make([]any, 0, 17*len(part))
		for _, r := range part {
			var closed any
			if r.closed.Valid {
				closed = r.closed.Int64
			}
			args = append(args, r.tenant, r.id, r.receipt, r.version, r.status, r.priority, r.owner, r.team, r.source,
				r.cat, r.subject, r.message, r.name, r.email, r.created, r.updated, closed)
		}
		q := `INSERT INTO ` + table + ` (` + inquiryCols + `) VALUES ` + placeholders(len(part), 17) + `
			ON CONFLICT (tenant_id, id) DO UPDATE SET version = excluded.version, status = excluded.status,
			priority = excluded.priority, owner = excluded.owner, team = excluded.team, updated_at = excluded.updated_at,
			closed_at = excluded.closed_at WHERE ` + table + `.version < excluded.version`
		if err := b.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

func insertTimeline(ctx context.Context, b *projections.Batch, table string, rows []timelineRow) error {
	const chunk = 500
	for i := 0; i < len(rows); i += chunk {
		part := rows[i:min(i+chunk, len(rows))]
		args := make([]any, 0, 7*len(part))
		for _, t := range part {
			args = append(args, t.tenant, t.id, t.version, t.typ, t.actor, t.at, t.data)
		}
		q := `INSERT INTO ` + table + ` (tenant_id, inquiry_id, version, type, actor, occurred_at, data) VALUES ` +
			placeholders(len(part), 7) + ` ON CONFLICT (tenant_id, inquiry_id, version) DO NOTHING`
		if err := b.Exec(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// placeholders returns n groups of width ? marks: (?, ?), (?, ?).
func placeholders(n, width int) string {
	group := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(group+", ", n), ", ")
}
