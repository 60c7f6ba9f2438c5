package reminders

import (
	"context"
	"fmt"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// IntentsName is the subscriber's name.
const IntentsName = "slackdueintents"

// IntentsVersion changes whenever the emitted jobs change in a way a rebuild must see (a rebuild
// emits nothing, so a kind emitted for new events only, as the escalation deletion, keeps it).
const IntentsVersion = 1

// Intents is the slackdueintents subscriber: for each FollowUpDue, SLAWarning and SLABreached it
// queues a reminder reply job (tenants with a thread destination), for each InquiryEscalated an
// escalation post job (tenants with an escalation destination), for each InquiryErased a job
// deleting the inquiry's escalation posts, in its checkpoint's transaction.
// slackeffects.Runtime.EmitTx records the effect keys first, so a redelivery never inserts twice
// and a rebuild (Batch.Replaying) inserts nothing. It has no tables of its own.
type Intents struct {
	Effects *slackeffects.Runtime
	Install *slackinstall.Store
}

var _ projections.Projection = (*Intents)(nil)

// Name implements projections.Projection.
func (*Intents) Name() string { return IntentsName }

// Version implements projections.Projection.
func (*Intents) Version() int { return IntentsVersion }

// ReadsPersonalData implements projections.PersonalReader: intents name inquiries and versions.
func (*Intents) ReadsPersonalData() bool { return false }

// Tables implements projections.Projection.
func (*Intents) Tables() []string { return nil }

// Setup implements projections.Projection.
func (*Intents) Setup(context.Context, *sqldb.DB, projections.Generation) error { return nil }

// Apply implements projections.Projection.
func (p *Intents) Apply(ctx context.Context, b *projections.Batch) error {
	if b.Replaying {
		return nil // a rebuild never emits: the live generation did
	}
	var intents []slackeffects.Intent
	for _, e := range b.Events {
		var args slackeffects.Args
		var what string
		switch e.Type {
		case "FollowUpDue", "SLAWarning", "SLABreached":
			what = "reminder"
		case "InquiryEscalated":
			what = "escalation"
		case "InquiryErased":
			what = "escalation-erase"
		default:
			continue
		}
		if !eventstore.KindInquiry.Of(e.StreamID) {
			continue
		}
		m, err := eventstore.DecodeMetadata(e.Metadata)
		if err != nil {
			return fmt.Errorf("%s: metadata: %w", e.StreamID, err)
		}
		id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, e.StreamID, m.TenantID)
		if !ok {
			return fmt.Errorf("%s: stream does not belong to tenant %q", e.StreamID, m.TenantID)
		}
		v := e.Revision + 1
		var has bool
		switch what {
		case "reminder":
			has, err = p.Install.HasDestination(ctx, b.Tx, m.TenantID)
			args = ReminderArgs{Tenant: m.TenantID, Inquiry: id, Version: v}
		case "escalation-erase":
			// Posts may have gone to a destination cleared since: the job reads what was posted.
			has, args = true, EscalationEraseArgs{Tenant: m.TenantID, Inquiry: id}
		default:
			has, err = p.Install.HasEscalationDestination(ctx, b.Tx, m.TenantID)
			args = EscalationArgs{Tenant: m.TenantID, Inquiry: id, Version: v}
		}
		if err != nil {
			return err
		}
		if !has {
			continue // no destination: no job, zero I/O
		}
		intents = append(intents, slackeffects.Intent{Key: fmt.Sprintf("slack/%s/%s/%s/%d", what, m.TenantID, id, v),
			Queued: slackeffects.Queued{Args: args}})
	}
	return p.Effects.EmitTx(ctx, b, IntentsName, intents)
}
