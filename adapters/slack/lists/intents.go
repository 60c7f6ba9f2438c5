package lists

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// IntentsName and RowMapName are the projections' names.
const (
	IntentsName = "listintents"
	RowMapName  = "listrowmap"
)

// Intents is the listintents subscriber. From inquiry streams, for each active List of the tenant,
// it inserts one sync job per inquiry per batch (the newest version) and, on a transition to a
// terminal state, a removal job scheduled at the transition's time + the List's delay — in the
// checkpoint's transaction. slackeffects.Runtime.EmitTx records the effect keys first: a
// redelivery never inserts twice and a rebuild (Batch.Replaying) inserts nothing. A tenant without
// an active List gets no job: zero I/O. It keeps no table: the List's health reads the desired version from the inquiry
// itself, and the reconciler works from the List's inventory and the log.
type Intents struct {
	Effects *slackeffects.Runtime
}

var _ projections.Projection = (*Intents)(nil)

// Name implements projections.Projection.
func (*Intents) Name() string { return IntentsName }

// Version implements projections.Projection.
func (*Intents) Version() int { return 1 }

// ReadsPersonalData implements projections.PersonalReader: intents name inquiries, versions
// and statuses.
func (*Intents) ReadsPersonalData() bool { return false }

// Tables implements projections.Projection: none.
func (*Intents) Tables() []string { return nil }

// Setup implements projections.Projection. Migration 1 of generations made before migration 2
// created slack_list_desired, each inquiry's desired version, which nothing read; migration 2
// drops it (and its view), so such a generation equals a new one and serves without a rebuild. A
// new generation creates nothing: its migration 1 is empty.
func (*Intents) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	return sqldb.Migrate(ctx, db, projections.GenerationName(IntentsName, gen), []sqldb.Migration{
		{Version: 1},
		{Version: 2, SQL: `DROP VIEW IF EXISTS slack_list_desired; DROP TABLE IF EXISTS ` + gen.Table("slack_list_desired")},
	})
}

type inqKey struct {
	tenant domain.TenantID
	id     domain.InquiryID
}

type terminal struct {
	version uint64
	at      time.Time
}

// streamInquiry returns the inquiry of a kind-{tenant}-{id} stream (false for other streams); the
// event's metadata must name the stream's tenant.
func streamInquiry(kind eventstore.StreamKind, stream string, meta []byte) (inqKey, bool, error) {
	if !kind.Of(stream) {
		return inqKey{}, false, nil
	}
	m, err := eventstore.DecodeMetadata(meta)
	if err != nil {
		return inqKey{}, false, fmt.Errorf("%s: metadata: %w", stream, err)
	}
	id, ok := eventstore.StreamInquiry(kind, stream, m.TenantID)
	if !ok {
		return inqKey{}, false, fmt.Errorf("%s: stream does not belong to tenant %q", stream, m.TenantID)
	}
	return inqKey{m.TenantID, id}, true, nil
}

// Apply implements projections.Projection.
func (p *Intents) Apply(ctx context.Context, b *projections.Batch) error {
	desired := map[inqKey]uint64{}
	terminals := map[inqKey]terminal{}
	var order []inqKey
	for _, e := range b.Events {
		k, ok, err := streamInquiry("inquiry", e.StreamID, e.Metadata)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if _, seen := desired[k]; !seen {
			order = append(order, k)
		}
		desired[k] = max(desired[k], e.Revision+1)
		if e.Type == "InquiryStatusChanged" {
			var ev domain.InquiryStatusChanged
			if err := json.Unmarshal(e.Data, &ev); err != nil {
				return err
			}
			m, err := eventstore.DecodeMetadata(e.Metadata)
			if err != nil {
				return err
			}
			if ev.To.Terminal() {
				terminals[k] = terminal{version: e.Revision + 1, at: m.OccurredAt}
			} else {
				delete(terminals, k)
			}
		}
	}
	type active struct {
		lists  []string
		delays []time.Duration
	}
	if b.Replaying {
		return nil // a rebuild never emits: the live generation did
	}
	actives := map[domain.TenantID]active{} // one read per tenant per batch
	var intents []slackeffects.Intent
	for _, k := range order {
		v := desired[k]
		a, known := actives[k.tenant]
		if !known {
			var err error
			if a.lists, a.delays, err = activeLists(ctx, b.DB, b.Tx, k.tenant); err != nil {
				return err
			}
			actives[k.tenant] = a
		}
		lists, delays := a.lists, a.delays
		for i, list := range lists {
			intents = append(intents, slackeffects.Intent{Key: fmt.Sprintf("slack/list/%s/%s/%s/%d", k.tenant, k.id, list, v),
				Queued: slackeffects.Queued{Args: SyncArgs{Tenant: k.tenant, Inquiry: k.id, List: list, Version: v}}})
			if t, ok := terminals[k]; ok {
				intents = append(intents, slackeffects.Intent{Key: fmt.Sprintf("slack/listremove/%s/%s/%s/%d", k.tenant, k.id, list, t.version),
					Queued: slackeffects.Queued{Args: RemoveArgs{Tenant: k.tenant, Inquiry: k.id, List: list, Version: t.version}, At: t.at.Add(delays[i])}})
			}
		}
	}
	return p.Effects.EmitTx(ctx, b, IntentsName, intents)
}

// RowMap is the listrowmap subscriber: (tenant, inquiry, list) → (row id, observed version,
// adopted), folded from List row events (slacklist streams, and the List events of legacy
// slackproj streams), so a replay rebuilds it.
type RowMap struct{}

var _ projections.Projection = RowMap{}

// Name implements projections.Projection.
func (RowMap) Name() string { return RowMapName }

// Version implements projections.Projection.
func (RowMap) Version() int { return 1 }

// ReadsPersonalData implements projections.PersonalReader: rows are folded from List row events.
func (RowMap) ReadsPersonalData() bool { return false }

// Tables implements projections.Projection.
func (RowMap) Tables() []string { return []string{"slack_list_rows"} }

// Setup implements projections.Projection.
func (RowMap) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	ddl := `CREATE TABLE IF NOT EXISTS ` + gen.Table("slack_list_rows") + ` (
	tenant_id        TEXT   NOT NULL,
	inquiry_id       TEXT   NOT NULL,
	list_id          TEXT   NOT NULL,
	row_id           TEXT   NOT NULL,
	observed_version BIGINT NOT NULL,
	adopted          INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, inquiry_id, list_id))`
	return sqldb.Migrate(ctx, db, projections.GenerationName(RowMapName, gen), []sqldb.Migration{{Version: 1, SQL: ddl}})
}

// Apply implements projections.Projection. Every statement is conditional on the row id, so a
// redelivered event changes nothing; none is read back, so all go with the batch's commit
// (Batch.ExecAtCommit): the batch takes its transaction id only in its last round trip.
func (RowMap) Apply(ctx context.Context, b *projections.Batch) error {
	t := b.Gen.Table("slack_list_rows")
	for _, e := range b.Events {
		kind := StreamKind
		switch {
		case !IsRowEvent(e.Type):
			continue
		case eventstore.KindSlackProjection.Of(e.StreamID):
			kind = eventstore.KindSlackProjection
		}
		k, ok, err := streamInquiry(kind, e.StreamID, e.Metadata)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		ev, err := decodeRowEvent(e.Type, e.Data)
		if err != nil {
			return err
		}
		switch e.Type {
		case "ListRowCreated", "ListRowAdopted":
			adopted := 0
			if e.Type == "ListRowAdopted" {
				adopted = 1
			}
			err = b.ExecAtCommit(ctx, `INSERT INTO `+t+` (tenant_id, inquiry_id, list_id, row_id, observed_version, adopted) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (tenant_id, inquiry_id, list_id) DO UPDATE SET row_id = excluded.row_id, observed_version = excluded.observed_version,
				adopted = excluded.adopted`, k.tenant, k.id, ev.List, ev.RowID, ev.Version, adopted)
		case "ListRowUpdated":
			err = b.ExecAtCommit(ctx, `UPDATE `+t+` SET observed_version = ? WHERE tenant_id = ? AND inquiry_id = ? AND list_id = ? AND row_id = ?
				AND observed_version < ?`, ev.Version, k.tenant, k.id, ev.List, ev.RowID, ev.Version)
		case "ListRowRemoved":
			err = b.ExecAtCommit(ctx, `DELETE FROM `+t+` WHERE tenant_id = ? AND inquiry_id = ? AND list_id = ? AND row_id = ?`, k.tenant, k.id, ev.List, ev.RowID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Row is one mapping of the listrowmap projection.
type Row struct {
	Tenant   domain.TenantID  `json:"tenant_id"`
	Inquiry  domain.InquiryID `json:"inquiry_id"`
	List     string           `json:"list_id"`
	RowID    string           `json:"row_id"`
	Observed uint64           `json:"observed_version"`
	Adopted  bool             `json:"adopted"`
}

// Rows reads a tenant's row mapping from the listrowmap view, ordered.
func Rows(ctx context.Context, db *sqldb.DB, tenant domain.TenantID) ([]Row, error) {
	rows, err := db.QueryContext(ctx, db.Rebind(`SELECT tenant_id, inquiry_id, list_id, row_id, observed_version, adopted FROM slack_list_rows
		WHERE tenant_id = ? ORDER BY inquiry_id, list_id`), tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Row{}
	for rows.Next() {
		var r Row
		var ad int
		if err := rows.Scan(&r.Tenant, &r.Inquiry, &r.List, &r.RowID, &r.Observed, &ad); err != nil {
			return nil, err
		}
		r.Adopted = ad == 1
		out = append(out, r)
	}
	return out, rows.Err()
}
