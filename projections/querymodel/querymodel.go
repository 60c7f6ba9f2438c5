// Package querymodel is the subscriber that builds the query API's tables: inquiries (list and
// detail) and their timeline. It folds each batch in memory and writes it in bulk (COPY on
// Postgres, multi-row statements on SQLite); every write is keyed by (tenant, inquiry, version),
// so applying an event twice changes nothing.
package querymodel

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Name is the projection's name.
const Name = "querymodel"

// Version must change whenever the tables below or the handler's output change; a deployment then
// rebuilds the query model before serving it (casebook replay --projection querymodel).
const Version = 5

// Schema returns the DDL of one generation ({g} stands for the generation suffix). A test ties it
// to Version, so a schema change without a version bump fails the build.
func Schema() string { return schema + ";\n" + indexes }

const schema = `
CREATE TABLE IF NOT EXISTS qm_inquiries{g} (
	tenant_id       TEXT{c} NOT NULL,
	id              TEXT{c} NOT NULL,
	receipt         TEXT   NOT NULL,
	version         BIGINT NOT NULL,
	status          TEXT{c} NOT NULL,
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
	archived        BIGINT NOT NULL DEFAULT 0,
	held            BIGINT NOT NULL DEFAULT 0,
	erased          BIGINT NOT NULL DEFAULT 0,
	retain_until    BIGINT,
	PRIMARY KEY (tenant_id, id)
);
CREATE TABLE IF NOT EXISTS qm_timeline{g} (
	tenant_id   TEXT{c} NOT NULL,
	inquiry_id  TEXT{c} NOT NULL,
	version     BIGINT NOT NULL,
	type        TEXT   NOT NULL,
	actor       TEXT   NOT NULL,
	occurred_at BIGINT NOT NULL,
	data        TEXT   NOT NULL,
	command_id  TEXT   NOT NULL DEFAULT ''
)`

// indexes are built by Finalize, once a generation is filled: the writer never reads through
// them (it dedupes by the inquiry row's version), so a rebuild need not maintain them row by row.
const indexes = `
CREATE UNIQUE INDEX IF NOT EXISTS qm_timeline{g}_key ON qm_timeline{g} (tenant_id, inquiry_id, version);
CREATE INDEX IF NOT EXISTS qm_inquiries{g}_list ON qm_inquiries{g} (tenant_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS qm_inquiries{g}_status ON qm_inquiries{g} (tenant_id, status, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS qm_inquiries{g}_receipt ON qm_inquiries{g} (tenant_id, receipt, created_at DESC, id DESC)`

// Projection builds the query model.
type Projection struct{}

var (
	_ projections.Projection = (*Projection)(nil)
	_ projections.Preparer   = (*Projection)(nil)
	_ projections.Finalizer  = (*Projection)(nil)
	_ projections.Windowed   = (*Projection)(nil)
)

// New returns the projection.
func New() *Projection { return &Projection{} }

// Name implements projections.Projection.
func (*Projection) Name() string { return Name }

// Version implements projections.Projection.
func (*Projection) Version() int { return Version }

// ReadsPersonalData implements projections.PersonalReader: the model serves requester, subject,
// message and note bodies.
func (*Projection) ReadsPersonalData() bool { return true }

// BatchWindow implements projections.Windowed. Reads wait for the query model (consistent=true,
// min_position), so its batches gather for 5 ms only: at 1,000 intakes/s that is a transaction per
// five or so intakes instead of one per append, for at most 5 ms more before an intake is visible.
func (*Projection) BatchWindow() time.Duration { return 5 * time.Millisecond }

// AwaitedByReads implements projections.ReadAwaited.
func (*Projection) AwaitedByReads() {}

// Tables implements projections.Projection.
func (*Projection) Tables() []string { return []string{"qm_inquiries", "qm_timeline"} }

// Setup implements projections.Projection.
func (*Projection) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	// Keys compare byte by byte on both backends ({c}): the same order as SQLite's, and index
	// builds and probes without the locale's collation rules.
	collate := ""
	if db.Dialect == sqldb.Postgres {
		collate = ` COLLATE "C"`
	}
	ddl := strings.NewReplacer("{g}", gen.Table(""), "{c}", collate).Replace(schema)
	return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen), []sqldb.Migration{{Version: 1, SQL: ddl}})
}

// Finalize implements projections.Finalizer. On Postgres each table is finalized on a connection
// of its own, the two at once: its statistics first (ANALYZE; the inquiries' then run beside the
// timeline's index build, which takes most of a rebuild's finishing time), then its indexes. Each
// build is idempotent and holds a lock named after its table, so finalizers of one generation on
// several replicas wait for each other instead of colliding.
func (q *Projection) Finalize(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	ddl := strings.ReplaceAll(indexes, "{g}", gen.Table(""))
	if db.Dialect != sqldb.Postgres {
		// The index builds sort with helper threads, one per further core (at least one).
		threads := max(1, runtime.GOMAXPROCS(0)-1)
		return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen)+"/indexes", []sqldb.Migration{{Version: 1, SQL: ddl, SortThreads: threads}})
	}
	byTable := map[string][]string{}
	for stmt := range strings.SplitSeq(ddl, ";") {
		if _, after, ok := strings.Cut(stmt, " ON "); ok {
			table, _, _ := strings.Cut(after, " ")
			byTable[table] = append(byTable[table], stmt)
		}
	}
	tables := q.Tables()
	for table := range byTable {
		if !slices.ContainsFunc(tables, func(base string) bool { return gen.Table(base) == table }) {
			return fmt.Errorf("querymodel: an index on %s, which is not one of the projection's tables", table)
		}
	}
	errs := make([]error, len(tables))
	var wg sync.WaitGroup
	for i, base := range tables {
		table := gen.Table(base)
		wg.Go(func() {
			errs[i] = sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 7345110021))`, table); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `ANALYZE `+table); err != nil {
					return fmt.Errorf("analyze %s: %w", table, err)
				}
				for _, stmt := range byTable[table] {
					if _, err := tx.ExecContext(ctx, stmt); err != nil {
						return fmt.Errorf("index %s: %w", table, err)
					}
				}
				return nil
			})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// row is an inquiry row being folded.
type row struct {
	tenant, id, receipt                        string
	version                                    uint64
	status, priority, owner, team, source, cat string
	subject, message, name, email              string
	created, updated                           int64
	closed                                     sql.NullInt64
	archived, held, erased                     int64
	retainUntil                                sql.NullInt64
	dirty                                      bool
	stored                                     bool // read from the table (else new in this batch)
}

type key struct{ tenant, id string }

type timelineRow struct {
	tenant, id string
	version    uint64
	typ, actor string
	at         int64
	data       string
	command    string
}

type decoded struct {
	key     key
	version uint64
	meta    domain.Metadata
	event   domain.Event
	typ     string
	// timeline is the event's timeline entry data: the event data, without personal fields.
	timeline string
}

// prepared is a decoded batch.
type prepared struct {
	evs  []decoded
	keys map[key]bool
	// born holds the keys whose InquiryReceived is in the batch.
	born map[key]bool
}

// Prepare implements projections.Preparer: it decodes a batch, using both cores for large ones.
func (*Projection) Prepare(recs []eventstore.RecordedEvent) (any, error) {
	out := make([]decoded, len(recs))
	errs := make([]error, len(recs))
	workers := 1
	if len(recs) >= 256 {
		workers = max(1, min(runtime.GOMAXPROCS(0), 4))
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(recs); i += workers {
				r := recs[i]
				if !eventstore.KindInquiry.Of(r.StreamID) {
					continue
				}
				if out[i], errs[i] = decode(r); errs[i] != nil {
					errs[i] = fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, errs[i])
				}
			}
		})
	}
	wg.Wait()
	// The batch's inquiry events, compacted in place (an event moves only to a lower index).
	p := &prepared{evs: out[:0], keys: map[key]bool{}, born: map[key]bool{}}
	for i, d := range out {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if d.typ == "" {
			continue // not an inquiry stream
		}
		p.evs = append(p.evs, d)
		p.keys[d.key] = true
		if _, ok := d.event.(domain.InquiryReceived); ok {
			p.born[d.key] = true
		}
	}
	return p, nil
}

// Apply implements projections.Projection.
func (q *Projection) Apply(ctx context.Context, b *projections.Batch) error {
	p, err := projections.PreparedOf[*prepared](b, q)
	if err != nil {
		return err
	}
	if len(p.evs) == 0 {
		return nil
	}
	queue := queued(b)
	if b.DB.Dialect != sqldb.Postgres || len(p.born) == 0 {
		return write(ctx, b, p, nil, queue)
	}
	// Inquiries received in this batch are not looked up: their rows are written as new, and the
	// write fails on the primary key if one exists after all (the batch is being applied again).
	// Queued with the commit, that fails the batch, which the runtime then applies event by event,
	// each written at once under the savepoint below: there the failure rolls back to it and the
	// batch is written again with every row looked up.
	if queue {
		return write(ctx, b, p, p.born, true)
	}
	if err := b.Savepoint(ctx, "qm_born"); err != nil {
		return err
	}
	err = write(ctx, b, p, p.born, false)
	if !sqldb.IsUniqueViolation(err) {
		// The savepoint is left open: it commits with the transaction, and a RELEASE would cost
		// a round trip while the batch holds its transaction id (see sqldb.Tx.ExecAtCommit).
		return err
	}
	if err := b.RollbackTo(ctx, "qm_born"); err != nil {
		return err
	}
	return write(ctx, b, p, nil, false)
}

// queued reports whether the batch's rows go with its commit (projections.Batch.ExecAtCommit): on
// Postgres, for a live batch applied at once. A rebuild copies its rows at once instead: COPY is
// the cheaper bulk write.
func queued(b *projections.Batch) bool {
	return !b.Replaying && b.QueuesAtCommit()
}

// write folds the batch into the stored rows and writes them with the timeline. Keys in skip are
// taken to have no row yet. With queue, the rows go with the commit.
func write(ctx context.Context, b *projections.Batch, p *prepared, skip map[key]bool, queue bool) error {
	inq := b.Gen.Table("qm_inquiries")
	rows, err := load(ctx, b, inq, p.keys, skip)
	if err != nil {
		return err
	}
	timeline := make([]timelineRow, 0, len(p.evs))
	for _, d := range p.evs {
		tl, fresh, err := fold(rows, d)
		if err != nil {
			return fmt.Errorf("inquiry %s version %d: %w", d.key.id, d.version, err)
		}
		if fresh {
			timeline = append(timeline, tl)
		}
	}
	erased, err := redactErased(timeline)
	if err != nil {
		return err
	}
	if err := upsert(ctx, b, inq, rows, queue); err != nil {
		return err
	}
	if err := insertTimeline(ctx, b, b.Gen.Table("qm_timeline"), timeline, queue); err != nil {
		return err
	}
	for _, k := range erased {
		if err := redactTimeline(ctx, b, b.Gen.Table("qm_timeline"), k.tenant, k.id); err != nil {
			return err
		}
	}
	return nil
}

// redactErased redacts, in place, the entries of timeline that belong to an inquiry erased in it,
// and returns those inquiries. The batch's own entries are redacted before they are written: queued
// with the commit, they are not there yet for redactTimeline to read back.
func redactErased(timeline []timelineRow) ([]key, error) {
	var erased []key
	seen := map[key]bool{}
	for _, t := range timeline {
		if k := (key{t.tenant, t.id}); t.typ == "InquiryErased" && !seen[k] {
			seen[k] = true
			erased = append(erased, k)
		}
	}
	if len(erased) == 0 {
		return nil, nil
	}
	for i, t := range timeline {
		if !seen[key{t.tenant, t.id}] {
			continue
		}
		red, err := domain.RedactJSON(t.typ, []byte(t.data))
		if err != nil {
			return nil, fmt.Errorf("redact %s: %w", t.typ, err)
		}
		timeline[i].data = string(red)
	}
	return erased, nil
}

// redactTimeline anonymizes an erased inquiry's stored timeline: every personal member of its
// entries reads domain.Erased. The entries themselves (type, actor, time) stay; the changes go
// with the commit (projections.Batch.ExecAtCommit).
func redactTimeline(ctx context.Context, b *projections.Batch, table, tenant, id string) error {
	type entry struct {
		version uint64
		data    string
	}
	change, err := func() ([]entry, error) {
		rs, err := b.Query(ctx, `SELECT version, type, data FROM `+table+` WHERE tenant_id = ? AND inquiry_id = ?`, tenant, id)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var out []entry
		for rs.Next() {
			var e entry
			var typ string
			if err := rs.Scan(&e.version, &typ, &e.data); err != nil {
				return nil, err
			}
			red, err := domain.RedactJSON(typ, []byte(e.data))
			if err != nil {
				return nil, fmt.Errorf("redact %s: %w", typ, err)
			}
			if string(red) != e.data {
				out = append(out, entry{e.version, string(red)})
			}
		}
		return out, rs.Err()
	}()
	if err != nil {
		return err
	}
	for _, e := range change {
		if err := b.ExecAtCommit(ctx, `UPDATE `+table+` SET data = ? WHERE tenant_id = ? AND inquiry_id = ? AND version = ?`, e.data, tenant, id, e.version); err != nil {
			return err
		}
	}
	return nil
}

func decode(r eventstore.RecordedEvent) (decoded, error) {
	m, err := eventstore.DecodeMetadata(r.Metadata)
	if err != nil {
		return decoded{}, fmt.Errorf("metadata: %w", err)
	}
	e, err := eventstore.DecodeEvent(r.Type, m.SchemaVersion, r.Data)
	if err != nil {
		return decoded{}, err
	}
	id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, r.StreamID, m.TenantID)
	if !ok {
		return decoded{}, fmt.Errorf("stream does not belong to tenant %q", m.TenantID)
	}
	d := decoded{key: key{string(m.TenantID), string(id)}, version: r.Revision + 1, meta: m, event: e, typ: r.Type}
	if e, ok := e.(domain.InquiryReceived); ok {
		// Personal fields stay on the detail row.
		b, err := json.Marshal(receivedEntry{Category: e.Category, Priority: e.Priority, Source: e.Source})
		if err != nil {
			return decoded{}, err
		}
		d.timeline = string(b)
	} else {
		d.timeline = string(r.Data)
	}
	return d, nil
}

// receivedEntry is the timeline data of an InquiryReceived.
type receivedEntry struct {
	Category string          `json:"category"`
	Priority domain.Priority `json:"priority"`
	Source   domain.Source   `json:"source"`
}

// errNoInquiry: an event for an inquiry whose first event was not applied (its stream parks).
var errNoInquiry = errors.New("event for an inquiry that was never received")

// fold applies one event to the rows and returns its timeline entry, and whether the entry is new.
// Events at or below a row's version were applied before and change nothing. The inquiry row and
// its timeline are written in one transaction, so a row at version v has timeline entries 1..v: a
// plain insert of the new entries cannot collide, and the write path needs no ON CONFLICT probe.
//
// The row's columns are folded by domain.Inquiry.Apply, the aggregate's own fold, so the query
// model and the command side cannot disagree (TestFoldAgreesWithAggregate). Only columns whose fold
// depends on stored columns alone are kept; the aggregate's other state is not carried over.
func fold(rows map[key]*row, d decoded) (timelineRow, bool, error) {
	at := d.meta.OccurredAt.UnixNano()
	tl := timelineRow{tenant: d.key.tenant, id: d.key.id, version: d.version, typ: d.typ, actor: string(d.meta.Actor), at: at, data: d.timeline,
		command: CommandRef(d.meta.CommandID)}
	r := rows[d.key]
	_, received := d.event.(domain.InquiryReceived)
	switch {
	case received && r != nil:
		return tl, false, nil
	case received:
		r = &row{tenant: d.key.tenant, id: d.key.id}
		rows[d.key] = r
	case r == nil:
		return tl, false, errNoInquiry
	case d.version <= r.version:
		return tl, false, nil
	}
	q := r.inquiry()
	q.Apply(d.event, d.meta.OccurredAt)
	r.set(&q)
	r.version, r.dirty = d.version, true
	return tl, true, nil
}

// inquiry is the row as aggregate state.
func (r *row) inquiry() domain.Inquiry {
	q := domain.Inquiry{
		ID: domain.InquiryID(r.id), TenantID: domain.TenantID(r.tenant), Source: domain.Source(r.source), Receipt: r.receipt,
		Requester: domain.Requester{Name: r.name, Email: r.email}, Subject: r.subject, Message: r.message, Category: r.cat,
		Status: domain.Status(r.status), Priority: domain.Priority(r.priority), Owner: domain.PrincipalID(r.owner), Team: r.team,
		Version: r.version,
	}
	if r.created != 0 {
		q.CreatedAt, q.UpdatedAt = time.Unix(0, r.created), time.Unix(0, r.updated)
	}
	if r.closed.Valid {
		q.ClosedAt = time.Unix(0, r.closed.Int64)
	}
	q.Archived, q.Held, q.Erased = r.archived != 0, r.held != 0, r.erased != 0
	if r.retainUntil.Valid {
		q.RetainUntil = time.Unix(0, r.retainUntil.Int64).UTC()
	}
	return q
}

// set stores the columns of q in the row.
func (r *row) set(q *domain.Inquiry) {
	r.receipt, r.source, r.cat = q.Receipt, string(q.Source), q.Category
	r.subject, r.message, r.name, r.email = q.Subject, q.Message, q.Requester.Name, q.Requester.Email
	r.status, r.priority, r.owner, r.team = string(q.Status), string(q.Priority), string(q.Owner), q.Team
	r.created, r.updated = q.CreatedAt.UnixNano(), q.UpdatedAt.UnixNano()
	r.closed = sql.NullInt64{}
	if !q.ClosedAt.IsZero() {
		r.closed = sql.NullInt64{Int64: q.ClosedAt.UnixNano(), Valid: true}
	}
	r.archived, r.held, r.erased = boolInt(q.Archived), boolInt(q.Held), boolInt(q.Erased)
	r.retainUntil = sql.NullInt64{}
	if !q.RetainUntil.IsZero() {
		r.retainUntil = sql.NullInt64{Int64: q.RetainUntil.UnixNano(), Valid: true}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// inquiryCols are qm_inquiries' columns, in the order of the rows the upserts write.
var inquiryCols, inquiryTypes = projections.Columns(`tenant_id text, id text, receipt text, version bigint, status text,
	priority text, owner text, team text, source text, category text, subject text, message text, requester_name text,
	requester_email text, created_at bigint, updated_at bigint, closed_at bigint, archived bigint, held bigint, erased bigint,
	retain_until bigint`)

// inquiryColumns are inquiryCols one by one, for COPY.
var inquiryColumns = strings.Split(inquiryCols, ", ")

// load reads the existing rows of the inquiries a batch touches, except those in skip.
func load(ctx context.Context, b *projections.Batch, table string, keys, skip map[key]bool) (map[key]*row, error) {
	out := make(map[key]*row, len(keys))
	all := make([]key, 0, len(keys))
	for k := range keys {
		if !skip[k] {
			all = append(all, k)
		}
	}
	const chunk = 1024
	for i := 0; i < len(all); i += chunk {
		part := all[i:min(i+chunk, len(all))]
		tenants, ids := make([]string, len(part)), make([]string, len(part))
		for j, k := range part {
			tenants[j], ids[j] = k.tenant, k.id
		}
		from, args := b.ByKeys(table, "tenant_id", "id", tenants, ids)
		q := `SELECT ` + inquiryCols + ` FROM ` + from
		if err := loadChunk(ctx, b, q, args, keys, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func loadChunk(ctx context.Context, b *projections.Batch, q string, args []any, want map[key]bool, out map[key]*row) error {
	rs, err := b.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		r := &row{}
		if err := rs.Scan(&r.tenant, &r.id, &r.receipt, &r.version, &r.status, &r.priority, &r.owner, &r.team, &r.source,
			&r.cat, &r.subject, &r.message, &r.name, &r.email, &r.created, &r.updated, &r.closed, &r.archived, &r.held, &r.erased, &r.retainUntil); err != nil {
			return err
		}
		if k := (key{r.tenant, r.id}); want[k] {
			r.stored = true
			out[k] = r
		}
	}
	return rs.Err()
}

// upsert writes the changed rows; a row never moves to an older version.
func upsert(ctx context.Context, b *projections.Batch, table string, rows map[key]*row, queue bool) error {
	var dirty []*row
	for _, r := range rows {
		if r.dirty {
			dirty = append(dirty, r)
		}
	}
	if len(dirty) == 0 {
		return nil
	}
	const onConflict = ` ON CONFLICT (tenant_id, id) DO UPDATE SET version = excluded.version, status = excluded.status,
		priority = excluded.priority, owner = excluded.owner, team = excluded.team, updated_at = excluded.updated_at,
		closed_at = excluded.closed_at, subject = excluded.subject, message = excluded.message,
		requester_name = excluded.requester_name, requester_email = excluded.requester_email, archived = excluded.archived,
		held = excluded.held, erased = excluded.erased, retain_until = excluded.retain_until WHERE `
	if b.DB.Dialect == sqldb.Postgres {
		return upsertPostgres(ctx, b, table, dirty, onConflict, queue)
	}
	// On SQLite every key was looked up (Apply skips none there): a row that was not stored is new,
	// and goes in without ON CONFLICT, which ExecRows runs as INSERT OR FAIL (no statement journal).
	var fresh, stored []any
	for _, r := range dirty {
		var closed, until any
		if r.closed.Valid {
			closed = r.closed.Int64
		}
		if r.retainUntil.Valid {
			until = r.retainUntil.Int64
		}
		vals := []any{r.tenant, r.id, r.receipt, r.version, r.status, r.priority, r.owner, r.team, r.source,
			r.cat, r.subject, r.message, r.name, r.email, r.created, r.updated, closed, r.archived, r.held, r.erased, until}
		if r.stored {
			stored = append(stored, vals...)
		} else {
			fresh = append(fresh, vals...)
		}
	}
	if err := b.ExecRows(ctx, `INSERT INTO `+table+` (`+inquiryCols+`)`, "", inquiryTypes, fresh); err != nil {
		return err
	}
	return b.ExecRows(ctx, `INSERT INTO `+table+` (`+inquiryCols+`)`, onConflict+table+`.version < excluded.version`, inquiryTypes, stored)
}

// upsertPostgres inserts the rows that are new in this batch and upserts the stored ones. A row that
// a lookup did not find cannot appear before the batch commits (every transaction writing a
// generation holds its checkpoint's lock); one that was not looked up (see Apply) and exists
// makes the insert fail with a unique violation. With queue, both statements go with the commit;
// else the new rows are copied (COPY) and the stored ones upserted at once.
func upsertPostgres(ctx context.Context, b *projections.Batch, table string, dirty []*row, onConflict string, queue bool) error {
	var fresh, stored []*row
	for _, r := range dirty {
		if r.stored {
			stored = append(stored, r)
		} else {
			fresh = append(fresh, r)
		}
	}
	if queue {
		for _, part := range []struct {
			rows     []*row
			conflict string
		}{{fresh, ""}, {stored, onConflict + table + `.version < excluded.version`}} {
			if len(part.rows) == 0 {
				continue
			}
			if err := b.ExecAtCommit(ctx, insertInquiriesSQL(table)+part.conflict, inquiryArrays(part.rows)...); err != nil {
				return err
			}
		}
		return nil
	}
	if len(fresh) > 0 {
		var c sqldb.CopyRows
		size := 0
		for _, r := range fresh {
			size += 2 + 13*4 + 8*12 + len(r.tenant) + len(r.id) + len(r.receipt) + len(r.status) + len(r.priority) + len(r.owner) +
				len(r.team) + len(r.source) + len(r.cat) + len(r.subject) + len(r.message) + len(r.name) + len(r.email)
		}
		c.Grow(size)
		for _, r := range fresh {
			c.Row(len(inquiryColumns))
			for _, v := range []string{r.tenant, r.id, r.receipt} {
				c.Text(v)
			}
			c.Int64(int64(r.version))
			for _, v := range []string{r.status, r.priority, r.owner, r.team, r.source, r.cat, r.subject, r.message, r.name, r.email} {
				c.Text(v)
			}
			c.Int64(r.created)
			c.Int64(r.updated)
			for _, v := range []sql.NullInt64{r.closed, {Int64: r.archived, Valid: true}, {Int64: r.held, Valid: true}, {Int64: r.erased, Valid: true}, r.retainUntil} {
				if v.Valid {
					c.Int64(v.Int64)
				} else {
					c.Null()
				}
			}
		}
		if err := b.CopyFrom(ctx, table, inquiryColumns, &c); err != nil {
			return fmt.Errorf("copy new inquiries: %w", err)
		}
	}
	if len(stored) == 0 {
		return nil
	}
	_, err := b.Tx.ExecContext(ctx, insertInquiriesSQL(table)+onConflict+table+`.version < excluded.version`, inquiryArrays(stored)...)
	return err
}

// insertInquiriesSQL inserts the rows of inquiryArrays' arrays: one statement with one array per
// column, no per-row parameters to parse and bind.
func insertInquiriesSQL(table string) string {
	return `INSERT INTO ` + table + ` (` + inquiryCols + `)` + projections.UnnestSelect(inquiryTypes)
}

// inquiryArrays is rows as insertInquiriesSQL's arguments.
func inquiryArrays(rows []*row) []any {
	cols := make([][]string, 13)
	ints := make([][]int64, 6)
	closed := make([]*int64, len(rows))
	until := make([]*int64, len(rows))
	for i := range cols {
		cols[i] = make([]string, len(rows))
	}
	for i := range ints {
		ints[i] = make([]int64, len(rows))
	}
	for i, r := range rows {
		for j, v := range []string{r.tenant, r.id, r.receipt, r.status, r.priority, r.owner, r.team, r.source, r.cat, r.subject, r.message, r.name, r.email} {
			cols[j][i] = v
		}
		ints[0][i], ints[1][i], ints[2][i] = int64(r.version), r.created, r.updated
		ints[3][i], ints[4][i], ints[5][i] = r.archived, r.held, r.erased
		if r.closed.Valid {
			v := r.closed.Int64
			closed[i] = &v
		}
		if r.retainUntil.Valid {
			v := r.retainUntil.Int64
			until[i] = &v
		}
	}
	return []any{cols[0], cols[1], cols[2], ints[0], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9],
		cols[10], cols[11], cols[12], ints[1], ints[2], closed, ints[3], ints[4], ints[5], until} // inquiryCols' order
}

// insertTimeline writes the timeline rows: on Postgres with COPY, or with queue in one statement
// of one array per column that goes with the commit.
func insertTimeline(ctx context.Context, b *projections.Batch, table string, rows []timelineRow, queue bool) error {
	if queue {
		if len(rows) == 0 {
			return nil
		}
		tenants, ids, types, actors, data, commands := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows)),
			make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
		versions, ats := make([]int64, len(rows)), make([]int64, len(rows))
		for i, t := range rows {
			tenants[i], ids[i], types[i], actors[i], data[i], commands[i] = t.tenant, t.id, t.typ, t.actor, t.data, t.command
			versions[i], ats[i] = int64(t.version), t.at
		}
		return b.ExecAtCommit(ctx, `INSERT INTO `+table+` (`+timelineCols+`)`+projections.UnnestSelect(timelineTypes),
			tenants, ids, versions, types, actors, ats, data, commands)
	}
	if b.DB.Dialect == sqldb.Postgres {
		var c sqldb.CopyRows
		size := 0
		for _, t := range rows {
			size += 2 + 6*4 + 2*12 + len(t.tenant) + len(t.id) + len(t.typ) + len(t.actor) + len(t.data) + len(t.command)
		}
		c.Grow(size)
		for _, t := range rows {
			c.Row(8)
			c.Text(t.tenant)
			c.Text(t.id)
			c.Int64(int64(t.version))
			c.Text(t.typ)
			c.Text(t.actor)
			c.Int64(t.at)
			c.Text(t.data)
			c.Text(t.command)
		}
		return b.CopyFrom(ctx, table, timelineColumns, &c)
	}
	args := make([]any, 0, 8*len(rows))
	for _, t := range rows {
		args = append(args, t.tenant, t.id, t.version, t.typ, t.actor, t.at, t.data, t.command)
	}
	return b.ExecRows(ctx, `INSERT INTO `+table+` (`+timelineCols+`)`, "", timelineTypes, args)
}

// timelineCols are qm_timeline's columns, in the order insertTimeline writes them.
var timelineCols, timelineTypes = projections.Columns(`tenant_id text, inquiry_id text, version bigint, type text, actor text,
	occurred_at bigint, data text, command_id text`)

// timelineColumns are timelineCols one by one, for COPY.
var timelineColumns = strings.Split(timelineCols, ", ")

// CommandRef is the timeline's reference to the command that appended an event: a digest of the
// command id, which may hold an idempotency key and NUL separators (Postgres text refuses NUL). The
// events of one command share it; "" for an event without a command id.
func CommandRef(commandID string) string {
	if commandID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(commandID))
	return "cmd_" + hex.EncodeToString(sum[:8])
}
