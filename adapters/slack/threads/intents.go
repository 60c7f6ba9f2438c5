package threads

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// IntentsName is the projection's name.
const IntentsName = "slackintents"

// IntentsVersion changes whenever slack_threads or the emitted jobs change.
const IntentsVersion = 1

const intentsSchema = `
CREATE TABLE IF NOT EXISTS slack_threads{g} (
	tenant_id        TEXT   NOT NULL,
	inquiry_id       TEXT   NOT NULL,
	desired_version  BIGINT NOT NULL DEFAULT 0,
	installation     TEXT   NOT NULL DEFAULT '',
	channel_id       TEXT   NOT NULL DEFAULT '',
	root_ts          TEXT   NOT NULL DEFAULT '',
	observed_version BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant_id, inquiry_id)
)`

// Intents is the slackintents subscriber. From inquiry streams it records each inquiry's desired
// version and, for tenants with a destination, queues one sync job per inquiry per batch (the
// newest version) in the checkpoint's transaction; slackeffects.Runtime.EmitTx records the effect
// keys first, so a redelivery never inserts twice and a rebuild (Batch.Replaying) inserts nothing.
// From thread events (slackthread streams, and the thread events of legacy slackproj streams) it
// folds the thread mapping (tenant, inquiry) → (installation, channel, root ts, observed version),
// which a replay rebuilds.
type Intents struct {
	Effects *slackeffects.Runtime
	Install *slackinstall.Store
}

var _ projections.Projection = (*Intents)(nil)

// Name implements projections.Projection.
func (*Intents) Name() string { return IntentsName }

// Version implements projections.Projection.
func (*Intents) Version() int { return IntentsVersion }

// ReadsPersonalData implements projections.PersonalReader: intents name inquiries and versions;
// the worker reads the inquiry when it sends.
func (*Intents) ReadsPersonalData() bool { return false }

// Tables implements projections.Projection.
func (*Intents) Tables() []string { return []string{"slack_threads"} }

// Setup implements projections.Projection.
func (*Intents) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	ddl := strings.ReplaceAll(intentsSchema, "{g}", gen.Table(""))
	return sqldb.Migrate(ctx, db, projections.GenerationName(IntentsName, gen), []sqldb.Migration{{Version: 1, SQL: ddl}})
}

type threadKey struct {
	tenant domain.TenantID
	id     domain.InquiryID
}

// Apply implements projections.Projection.
func (p *Intents) Apply(ctx context.Context, b *projections.Batch) error {
	table := b.Gen.Table("slack_threads")
	desired := map[threadKey]uint64{}
	erased := map[threadKey]bool{}
	rootTS := map[threadKey]string{} // the root each mapping names after this batch's thread events
	var order []threadKey
	for _, e := range b.Events {
		var kind eventstore.StreamKind
		switch {
		case eventstore.KindInquiry.Of(e.StreamID):
		case StreamKind.Of(e.StreamID):
			kind = StreamKind
		case eventstore.KindSlackProjection.Of(e.StreamID) && IsThreadEvent(e.Type):
			kind = eventstore.KindSlackProjection
		default:
			continue
		}
		m, err := eventstore.DecodeMetadata(e.Metadata)
		if err != nil {
			return fmt.Errorf("%s: metadata: %w", e.StreamID, err)
		}
		if eventstore.KindInquiry.Of(e.StreamID) {
			id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, e.StreamID, m.TenantID)
			if !ok {
				return fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
			}
			k := threadKey{m.TenantID, id}
			if _, seen := desired[k]; !seen {
				order = append(order, k)
			}
			desired[k] = max(desired[k], e.Revision+1)
			if e.Type == "InquiryErased" {
				erased[k] = true
			}
			continue
		}
		id, ok := eventstore.StreamInquiry(kind, e.StreamID, m.TenantID)
		if !ok {
			return fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
		}
		ts, mapped, err := p.foldThread(ctx, b, table, m.TenantID, id, e)
		if err != nil {
			return err
		}
		if mapped {
			rootTS[threadKey{m.TenantID, id}] = ts
		}
	}
	raise := make([]slackeffects.Desired, len(order))
	for i, k := range order {
		raise[i] = slackeffects.Desired{Tenant: k.tenant, Inquiry: k.id, Version: desired[k]}
	}
	if err := slackeffects.RaiseDesired(ctx, b, table, raise); err != nil {
		return err
	}
	if b.Replaying {
		return nil // a rebuild never emits: the live generation did
	}
	hasDest := map[domain.TenantID]bool{} // one lookup per tenant per batch
	var intents []slackeffects.Intent
	for _, k := range order {
		v := desired[k]
		has, known := hasDest[k.tenant]
		if !known {
			var err error
			if has, err = p.Install.HasDestination(ctx, b.Tx, k.tenant); err != nil {
				return err
			}
			hasDest[k.tenant] = has
		}
		if !has && erased[k] {
			// An erasure deletes a posted thread even when the tenant has no destination any
			// more: the mapping keeps where it was posted (this batch's thread events included,
			// whose writes go with the commit).
			ts, mapped := rootTS[k]
			if !mapped {
				err := b.QueryRow(ctx, `SELECT root_ts FROM `+table+` WHERE tenant_id = ? AND inquiry_id = ?`, k.tenant, k.id).Scan(&ts)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			has = ts != ""
		}
		if !has {
			continue // Slack disabled for the tenant: no job, zero I/O
		}
		intents = append(intents, slackeffects.Intent{Key: fmt.Sprintf("slack/thread/%s/%s/%d", k.tenant, k.id, v),
			Queued: slackeffects.Queued{Args: SyncArgs{Tenant: k.tenant, Inquiry: k.id, Version: v}}})
	}
	return p.Effects.EmitTx(ctx, b, IntentsName, intents)
}

// foldThread applies one slackproj event to the mapping row. Events at or below the row's
// observed version change nothing, so redelivery is harmless. Its writes go with the batch's
// commit (Batch.ExecAtCommit): the batch takes its transaction id in its last round trips, not at
// its first thread event. It reports the root the mapping names after a posting or a deletion
// (mapped), which the batch's own reads do not see before the commit.
func (p *Intents) foldThread(ctx context.Context, b *projections.Batch, table string, tenant domain.TenantID, id domain.InquiryID, e eventstore.RecordedEvent) (ts string, mapped bool, err error) {
	if err := b.ExecAtCommit(ctx, `INSERT INTO `+table+` (tenant_id, inquiry_id) VALUES (?, ?) ON CONFLICT (tenant_id, inquiry_id) DO NOTHING`, tenant, id); err != nil {
		return "", false, err
	}
	switch e.Type {
	case "SlackThreadPosted":
		var ev SlackThreadPosted
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			return "", false, err
		}
		return ev.TS, true, b.ExecAtCommit(ctx, `UPDATE `+table+` SET installation = ?, channel_id = ?, root_ts = ?, observed_version = ?
			WHERE tenant_id = ? AND inquiry_id = ?`, ev.Installation, ev.Channel, ev.TS, ev.Version, tenant, id)
	case "SlackThreadSynced":
		var ev SlackThreadSynced
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			return "", false, err
		}
		return "", false, b.ExecAtCommit(ctx, `UPDATE `+table+` SET observed_version = ? WHERE tenant_id = ? AND inquiry_id = ? AND observed_version < ?`,
			ev.Version, tenant, id, ev.Version)
	case "SlackThreadDeleteProgress":
		return "", false, nil // the worker's own bookkeeping: the mapping holds until the thread is deleted
	case "SlackThreadDeleted":
		// The mapping is revoked: a click on the deleted thread's buttons finds no inquiry.
		return "", true, b.ExecAtCommit(ctx, `UPDATE `+table+` SET installation = '', channel_id = '', root_ts = '' WHERE tenant_id = ? AND inquiry_id = ?`, tenant, id)
	}
	return "", false, fmt.Errorf("threads: unknown event type %q", e.Type)
}
