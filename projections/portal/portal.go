// Package portal is the subscriber that indexes authenticated intake by its submitter: which
// inquiries each integration (or operator) submitted, under which receipt and for which of the
// portal's own customers (external_id). Portal reads find their inquiries here and read what a
// requester may see from the inquiry's own stream, so the index holds no personal field but the
// portal's customer id, and an integration can only ever be shown what it submitted.
package portal

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/flatjson"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Name is the projection's name.
const Name = "portal"

// Version changes whenever the table or what is indexed changes.
const Version = 1

const schema = `
CREATE TABLE IF NOT EXISTS portal_inquiries{g} (
	tenant_id    TEXT   NOT NULL,
	inquiry_id   TEXT   NOT NULL,
	submitted_by TEXT   NOT NULL,
	external_id  TEXT   NOT NULL DEFAULT '',
	receipt      TEXT   NOT NULL,
	created_at   BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, inquiry_id)
);
CREATE INDEX IF NOT EXISTS portal_inquiries{g}_external ON portal_inquiries{g} (tenant_id, submitted_by, external_id, created_at);
CREATE INDEX IF NOT EXISTS portal_inquiries{g}_receipt ON portal_inquiries{g} (tenant_id, submitted_by, receipt)`

// Projection is the portal index subscriber.
type Projection struct{}

var (
	_ projections.Projection = (*Projection)(nil)
	_ projections.Windowed   = (*Projection)(nil)
	_ projections.Preparer   = (*Projection)(nil)
)

// Name implements projections.Projection.
func (*Projection) Name() string { return Name }

// Version implements projections.Projection.
func (*Projection) Version() int { return Version }

// ReadsPersonalData implements projections.PersonalReader: the index finds inquiries by the
// portal's customer id (external_id).
func (*Projection) ReadsPersonalData() bool { return true }

var _ projections.PersonalSelector = (*Projection)(nil)

// NeedsPersonalData implements projections.PersonalSelector: only an InquiryReceived with a
// submitter is indexed, and only its customer id is personal. Public intakes, the bulk of the
// log, are never opened for it.
func (*Projection) NeedsPersonalData(e eventstore.RecordedEvent) bool {
	return e.Type == "InquiryReceived" && maySubmit(e.Data)
}

// maySubmit reports whether an InquiryReceived's data may decode with a submitter: false only
// when it is a flat object none of whose member names encoding/json would read as submitted_by.
func maySubmit(data []byte) bool {
	named := false
	if !flatjson.Each(data, func(k, _ []byte, _ flatjson.Kind) {
		named = named || flatjson.MayName(k, "submitted_by")
	}) {
		return true
	}
	return named
}

// BatchWindow implements projections.Windowed: portal reads wait for this index (read your
// writes), so, like the query model, its batches gather for 5 ms only.
func (*Projection) BatchWindow() time.Duration { return 5 * time.Millisecond }

// AwaitedByReads implements projections.ReadAwaited.
func (*Projection) AwaitedByReads() {}

// Tables implements projections.Projection.
func (*Projection) Tables() []string { return []string{"portal_inquiries"} }

// Setup implements projections.Projection.
func (*Projection) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	ddl := strings.ReplaceAll(schema, "{g}", gen.Table(""))
	return sqldb.Migrate(ctx, db, projections.GenerationName(Name, gen), []sqldb.Migration{{Version: 1, SQL: ddl}})
}

// prepared is a batch's writes, computed outside its transaction: the rows of the batch's
// InquiryReceived events (one multi-row statement), then the erased inquiries, in event order.
type prepared struct {
	rows   []any // tenant_id, inquiry_id, submitted_by, external_id, receipt, created_at per row
	erased []any // tenant_id, inquiry_id per erased inquiry
}

// Prepare implements projections.Preparer: decoding and rows need no transaction.
func (*Projection) Prepare(evs []eventstore.RecordedEvent) (any, error) {
	out := &prepared{}
	for _, e := range evs {
		if !eventstore.KindInquiry.Of(e.StreamID) || (e.Type != "InquiryReceived" && e.Type != "InquiryErased") {
			continue
		}
		m, err := eventstore.DecodeMetadata(e.Metadata)
		if err != nil {
			return nil, fmt.Errorf("%s revision %d: metadata: %w", e.StreamID, e.Revision, err)
		}
		if e.Type == "InquiryErased" {
			// The customer id names the person: an erased inquiry is no longer found by it.
			id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, e.StreamID, m.TenantID)
			if !ok {
				return nil, fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
			}
			out.erased = append(out.erased, m.TenantID, id)
			continue
		}
		ev, err := eventstore.DecodeEvent(e.Type, m.SchemaVersion, e.Data)
		if err != nil {
			return nil, err
		}
		rec, ok := ev.(domain.InquiryReceived)
		if !ok || rec.SubmittedBy == "" {
			continue
		}
		if rec.TenantID != m.TenantID {
			return nil, fmt.Errorf("%s: event of tenant %q in an inquiry of %q", e.StreamID, m.TenantID, rec.TenantID)
		}
		out.rows = append(out.rows, rec.TenantID, rec.InquiryID, rec.SubmittedBy, externalID(rec.ExternalID), rec.Receipt, m.OccurredAt.UnixNano())
	}
	return out, nil
}

// rowCols are the columns of the rows prepare gathers, in their order.
var rowCols, rowTypes = projections.Columns("tenant_id text, inquiry_id text, submitted_by text, external_id text, receipt text, created_at bigint")

// Apply implements projections.Projection: every InquiryReceived with a submitter becomes a row.
// An inquiry's InquiryReceived comes before its erasure, so the batch's rows are inserted first.
// Nothing is read back: every statement goes with the commit (projections.Batch.ExecAtCommit).
func (p *Projection) Apply(ctx context.Context, b *projections.Batch) error {
	pr, err := projections.PreparedOf[*prepared](b, p)
	if err != nil {
		return err
	}
	table := b.Gen.Table("portal_inquiries")
	if err := b.ExecRowsAtCommit(ctx, `INSERT INTO `+table+` (`+rowCols+`)`,
		` ON CONFLICT (tenant_id, inquiry_id) DO NOTHING`, rowTypes, pr.rows); err != nil {
		return err
	}
	for i := 0; i < len(pr.erased); i += 2 {
		if err := b.ExecAtCommit(ctx, `UPDATE `+table+` SET external_id = '' WHERE tenant_id = ? AND inquiry_id = ?`, pr.erased[i], pr.erased[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// externalID is what the index keeps of a customer id: nothing once erased (a replay after an
// erasure reads the sealed member as domain.Erased, which must find nothing).
func externalID(v string) string {
	if v == domain.Erased {
		return ""
	}
	return v
}

// Find lists, newest first and at most limit, the inquiries of tenant that submitter submitted,
// with the given receipt or external id (one of them must be set). It reads the served generation.
func Find(ctx context.Context, db *sqldb.DB, tenant domain.TenantID, submitter domain.PrincipalID, receipt, externalID string, limit int) ([]domain.InquiryID, error) {
	where, arg := "receipt = ?", receipt
	if receipt == "" {
		where, arg = "external_id = ?", externalID
	}
	if arg == "" || tenant == "" || submitter == "" {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, db.Rebind(`SELECT inquiry_id FROM portal_inquiries
		WHERE tenant_id = ? AND submitted_by = ? AND `+where+` ORDER BY created_at DESC, inquiry_id LIMIT ?`),
		tenant, submitter, arg, limit)
	if err != nil {
		return nil, fmt.Errorf("portal index: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []domain.InquiryID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, domain.InquiryID(id))
	}
	return out, rows.Err()
}
