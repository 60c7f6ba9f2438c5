// Package privacy is the subscriber behind the data-lifecycle work that must find inquiries
// without reading them: the requester blind index (which inquiries a person's email address filed,
// for access and erasure requests) and the retention index (when each inquiry was archived or
// closed, its category and whether it is held, for the retention policy job).
//
// The blind index never holds an address: only a keyed HMAC of the normalized address (see
// sealed.Keys.BlindIndex), whose key is derived from the master key and stored nowhere. It is built
// from the opened events, so a replay rebuilds it, and an erased inquiry's address reads "[erased]"
// and is not indexed: erasure removes its entries at once (InquiryErased), and for good.
package privacy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Name is the projection's name.
const Name = "privacy"

// Version changes whenever the tables' rows change; a change of indexes is a migration (Setup).
const Version = 1

const schema = `
CREATE TABLE IF NOT EXISTS privacy_requesters{g} (
	tenant_id   TEXT   NOT NULL,
	email_index TEXT   NOT NULL,
	inquiry_id  TEXT   NOT NULL,
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, email_index, inquiry_id)
);
CREATE INDEX IF NOT EXISTS privacy_requesters{g}_inquiry ON privacy_requesters{g} (tenant_id, inquiry_id);
CREATE TABLE IF NOT EXISTS privacy_retention{g} (
	tenant_id   TEXT   NOT NULL,
	inquiry_id  TEXT   NOT NULL,
	category    TEXT   NOT NULL DEFAULT '',
	archived_at BIGINT,
	closed_at   BIGINT,
	held        BIGINT NOT NULL DEFAULT 0,
	erased_at   BIGINT,
	PRIMARY KEY (tenant_id, inquiry_id)
);
CREATE INDEX IF NOT EXISTS privacy_retention{g}_archived ON privacy_retention{g} (tenant_id, archived_at);
CREATE INDEX IF NOT EXISTS privacy_retention{g}_closed ON privacy_retention{g} (tenant_id, closed_at);
CREATE INDEX IF NOT EXISTS privacy_retention{g}_erased ON privacy_retention{g} (erased_at)`

// sparseIndexes (migration 2) index only the rows that have an archive, close or erasure time:
// an open inquiry adds no entry. A comparison on the column, as the retention sweeps make, implies
// it is not NULL, so those statements can still use them.
const sparseIndexes = `
DROP INDEX IF EXISTS privacy_retention{g}_archived;
CREATE INDEX privacy_retention{g}_archived ON privacy_retention{g} (tenant_id, archived_at) WHERE archived_at IS NOT NULL;
DROP INDEX IF EXISTS privacy_retention{g}_closed;
CREATE INDEX privacy_retention{g}_closed ON privacy_retention{g} (tenant_id, closed_at) WHERE closed_at IS NOT NULL;
DROP INDEX IF EXISTS privacy_retention{g}_erased;
CREATE INDEX privacy_retention{g}_erased ON privacy_retention{g} (erased_at) WHERE erased_at IS NOT NULL`

// Indexer computes the blind index of a normalized email address in a tenant.
type Indexer func(tenant domain.TenantID, email string) string

// Projection is the privacy subscriber.
type Projection struct {
	// Index computes the blind index entries are written under (the current master key's).
	Index Indexer
	// Erased, if set, is called when a batch holds an erasure, before it commits (again when the
	// batch is retried or replayed): the storage clean-up after erasures starts from it.
	Erased func()
}

var _ projections.Projection = (*Projection)(nil)

// Name implements projections.Projection.
func (*Projection) Name() string { return Name }

// Version implements projections.Projection.
func (*Projection) Version() int { return Version }

// ReadsPersonalData implements projections.PersonalReader: the index holds the requester
// address's blind index.
func (*Projection) ReadsPersonalData() bool { return true }

var _ projections.PersonalSelector = (*Projection)(nil)

// NeedsPersonalData implements projections.PersonalSelector: the address is read from an
// InquiryReceived only; notes and follow-ups are never opened for the index.
func (*Projection) NeedsPersonalData(e eventstore.RecordedEvent) bool {
	return e.Type == "InquiryReceived"
}

// Tables implements projections.Projection.
func (*Projection) Tables() []string { return []string{"privacy_requesters", "privacy_retention"} }

// Setup implements projections.Projection.
func (*Projection) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	g := strings.NewReplacer("{g}", gen.Table(""))
	return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen), []sqldb.Migration{
		{Version: 1, SQL: g.Replace(schema)}, {Version: 2, SQL: g.Replace(sparseIndexes)}})
}

// NormalizeEmail is the form an address is indexed and looked up in: trimmed and lower-cased
// (local parts are case-insensitive in practice, and a person types their address either way).
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func nanos(t time.Time) int64 { return t.UnixNano() }

// prepared is a batch's writes, computed outside its transaction: the rows inserted (blind index
// entries and retention rows, one multi-row statement each) and then, in event order, the
// statements for later events of an inquiry.
type prepared struct {
	requesters []any // tenant_id, email_index, inquiry_id, created_at per row
	retention  []any // tenant_id, inquiry_id, category per row
	updates    []update
}

// update is one statement of a later event: q names the tables as {req} and {ret}.
type update struct {
	q    string
	args []any
}

var _ projections.Preparer = (*Projection)(nil)

// Prepare implements projections.Preparer: decoding, blind indexes and rows need no transaction.
func (p *Projection) Prepare(evs []eventstore.RecordedEvent) (any, error) {
	out := &prepared{}
	for _, e := range evs {
		if !eventstore.KindInquiry.Of(e.StreamID) {
			continue
		}
		switch e.Type {
		case "InquiryReceived", "InquiryStatusChanged", "InquiryArchived", "InquiryUnarchived", "LegalHoldPlaced", "LegalHoldReleased", "InquiryErased":
		default:
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
		id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, e.StreamID, m.TenantID)
		if !ok {
			return nil, fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
		}
		at := nanos(m.OccurredAt)
		var u update
		switch ev := ev.(type) {
		case domain.InquiryReceived:
			if ev.TenantID != m.TenantID {
				return nil, fmt.Errorf("%s: event of tenant %q in an inquiry of %q", e.StreamID, m.TenantID, ev.TenantID)
			}
			if email := NormalizeEmail(ev.Requester.Email); email != "" && email != domain.Erased && p.Index != nil {
				out.requesters = append(out.requesters, m.TenantID, p.Index(m.TenantID, email), id, at)
			}
			out.retention = append(out.retention, m.TenantID, id, ev.Category)
			continue
		case domain.InquiryStatusChanged:
			if !ev.To.Terminal() && ev.From != "" && !ev.From.Terminal() {
				continue // open to open: closed_at stays NULL
			}
			closed := sql.NullInt64{}
			if ev.To.Terminal() {
				closed = sql.NullInt64{Int64: at, Valid: true}
			}
			u = update{`UPDATE {ret} SET closed_at = ? WHERE tenant_id = ? AND inquiry_id = ?`, []any{closed, m.TenantID, id}}
		case domain.InquiryArchived:
			u = update{`UPDATE {ret} SET archived_at = ? WHERE tenant_id = ? AND inquiry_id = ?`, []any{at, m.TenantID, id}}
		case domain.InquiryUnarchived:
			u = update{`UPDATE {ret} SET archived_at = NULL WHERE tenant_id = ? AND inquiry_id = ?`, []any{m.TenantID, id}}
		case domain.LegalHoldPlaced:
			u = update{`UPDATE {ret} SET held = 1 WHERE tenant_id = ? AND inquiry_id = ?`, []any{m.TenantID, id}}
		case domain.LegalHoldReleased:
			u = update{`UPDATE {ret} SET held = 0 WHERE tenant_id = ? AND inquiry_id = ?`, []any{m.TenantID, id}}
		case domain.InquiryErased:
			if p.Erased != nil {
				p.Erased()
			}
			out.updates = append(out.updates, update{`DELETE FROM {req} WHERE tenant_id = ? AND inquiry_id = ?`, []any{m.TenantID, id}})
			u = update{`UPDATE {ret} SET erased_at = COALESCE(erased_at, ?) WHERE tenant_id = ? AND inquiry_id = ?`, []any{at, m.TenantID, id}}
		default:
			continue
		}
		out.updates = append(out.updates, u)
	}
	return out, nil
}

// The columns of the rows an InquiryReceived adds (prepare), in their order.
var (
	requesterCols, requesterTypes = projections.Columns("tenant_id text, email_index text, inquiry_id text, created_at bigint")
	retentionCols, retentionTypes = projections.Columns("tenant_id text, inquiry_id text, category text")
)

// Apply implements projections.Projection. An inquiry's InquiryReceived comes before its other
// events, so the batch's inserts go first, then its other statements in event order. Nothing is
// read back, so every statement goes with the commit (projections.Batch.ExecAtCommit).
func (p *Projection) Apply(ctx context.Context, b *projections.Batch) error {
	pr, err := projections.PreparedOf[*prepared](b, p)
	if err != nil {
		return err
	}
	req, ret := b.Gen.Table("privacy_requesters"), b.Gen.Table("privacy_retention")
	if err := b.ExecRowsAtCommit(ctx, `INSERT INTO `+req+` (`+requesterCols+`)`,
		` ON CONFLICT (tenant_id, email_index, inquiry_id) DO NOTHING`, requesterTypes, pr.requesters); err != nil {
		return err
	}
	if err := b.ExecRowsAtCommit(ctx, `INSERT INTO `+ret+` (`+retentionCols+`)`,
		` ON CONFLICT (tenant_id, inquiry_id) DO NOTHING`, retentionTypes, pr.retention); err != nil {
		return err
	}
	tables := strings.NewReplacer("{req}", req, "{ret}", ret)
	for _, u := range pr.updates {
		if err := b.ExecAtCommit(ctx, tables.Replace(u.q), u.args...); err != nil {
			return err
		}
	}
	return nil
}

// Find lists, oldest first and at most limit, the inquiries of tenant whose requester address has
// one of the given blind indexes. It reads the served generation.
func Find(ctx context.Context, db *sqldb.DB, tenant domain.TenantID, indexes []string, limit int) ([]domain.InquiryID, error) {
	if tenant == "" || len(indexes) == 0 {
		return nil, nil
	}
	args := []any{tenant}
	for _, ix := range indexes {
		args = append(args, ix)
	}
	args = append(args, limit)
	rows, err := db.QueryContext(ctx, db.Rebind(`SELECT DISTINCT inquiry_id, created_at FROM privacy_requesters
		WHERE tenant_id = ? AND email_index IN (?`+strings.Repeat(", ?", len(indexes)-1)+`) ORDER BY created_at, inquiry_id LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("requester index: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []domain.InquiryID
	for rows.Next() {
		var id string
		var created int64
		if err := rows.Scan(&id, &created); err != nil {
			return nil, err
		}
		out = append(out, domain.InquiryID(id))
	}
	return out, rows.Err()
}

// Candidate is an inquiry the retention index proposes to the policy job.
type Candidate struct {
	Tenant  domain.TenantID
	Inquiry domain.InquiryID
	domain.RetentionFacts
	Held bool
}

// Tenants lists the tenants that have inquiries in the retention index.
func Tenants(ctx context.Context, db *sqldb.DB) ([]domain.TenantID, error) {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT tenant_id FROM privacy_retention ORDER BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("retention index: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []domain.TenantID
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, domain.TenantID(t))
	}
	return out, rows.Err()
}

// Candidates lists, at most limit and after the inquiry id after, the tenant's unerased inquiries
// archived at or before archivedBy or closed at or before closedBy (a zero time: that rule is not
// asked). The policy decides on each; the index only narrows the search.
func Candidates(ctx context.Context, db *sqldb.DB, tenant domain.TenantID, archivedBy, closedBy time.Time, after domain.InquiryID, limit int) ([]Candidate, error) {
	var conds []string
	args := []any{tenant, after}
	if !archivedBy.IsZero() {
		conds, args = append(conds, "archived_at <= ?"), append(args, nanos(archivedBy))
	}
	if !closedBy.IsZero() {
		conds, args = append(conds, "closed_at <= ?"), append(args, nanos(closedBy))
	}
	if len(conds) == 0 {
		return nil, nil
	}
	args = append(args, limit)
	rows, err := db.QueryContext(ctx, db.Rebind(`SELECT inquiry_id, category, archived_at, closed_at, held FROM privacy_retention
		WHERE tenant_id = ? AND inquiry_id > ? AND erased_at IS NULL AND (`+strings.Join(conds, " OR ")+`) ORDER BY inquiry_id LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("retention index: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []Candidate
	for rows.Next() {
		var c Candidate
		var archived, closed sql.NullInt64
		var held int64
		if err := rows.Scan(&c.Inquiry, &c.Category, &archived, &closed, &held); err != nil {
			return nil, err
		}
		c.Tenant, c.Held = tenant, held != 0
		if archived.Valid {
			c.ArchivedAt = time.Unix(0, archived.Int64).UTC()
		}
		if closed.Valid {
			c.ClosedAt = time.Unix(0, closed.Int64).UTC()
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ErasedSince lists the inquiries erased at or after since (every tenant), at most limit: the
// policy job makes sure their data keys are destroyed, which completes an erasure interrupted
// between its tombstone and the key's destruction.
func ErasedSince(ctx context.Context, db *sqldb.DB, since time.Time, limit int) ([]Candidate, error) {
	rows, err := db.QueryContext(ctx, db.Rebind(`SELECT tenant_id, inquiry_id FROM privacy_retention WHERE erased_at >= ?
		ORDER BY erased_at LIMIT ?`), nanos(since), limit)
	if err != nil {
		return nil, fmt.Errorf("retention index: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []Candidate
	for rows.Next() {
		var c Candidate
		if err := rows.Scan(&c.Tenant, &c.Inquiry); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
