package querymodel_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/queries"
)

// foldSamples are events with telling values; an event type without one is tested with its zero
// value (decoded from "{}"), so a new type is covered as soon as Decode knows it.
var foldSamples = map[string]domain.Event{
	"InquiryTriaged":       domain.InquiryTriaged{}, // no priority: the old one stays
	"InquiryStatusChanged": domain.InquiryStatusChanged{From: domain.StatusInProgress, To: domain.StatusResolved},
	"InquiryAssigned":      domain.InquiryAssigned{Owner: "op2", Previous: "op1", Team: "billing"},
	"NoteAdded":            domain.NoteAdded{Body: "called"},
	"InquiryRouted":        domain.InquiryRouted{Team: "billing"},
	"InquiryArchived":      domain.InquiryArchived{Reason: "done", RetainUntil: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Class: "default"},
}

// TestFoldAgreesWithAggregate: for every event type Decode knows, after an inquiry's stream
// (received, triaged high, assigned, in progress, then that event), the query model's row and the
// aggregate folded by the command side agree on every field the row holds, on both backends.
func TestFoldAgreesWithAggregate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := setup(t, db)
		ctx := t.Context()
		const tenant = domain.TenantID("t1")
		base := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
		var ids []domain.InquiryID
		for i, typ := range domain.EventTypes() {
			if typ == "InquiryReceived" {
				continue
			}
			last, ok := foldSamples[typ]
			if !ok {
				var err error
				if last, err = domain.Decode(typ, domain.SchemaVersion, []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			id := domain.InquiryID(fmt.Sprintf("inq-%02d", i))
			ids = append(ids, id)
			evs := []domain.Event{
				domain.InquiryReceived{InquiryID: id, TenantID: tenant, Source: domain.SourceAPI, Receipt: "CB-" + string(id),
					Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "s", Message: "m", Category: "billing",
					Priority: domain.PriorityNormal},
				domain.InquiryTriaged{Priority: domain.PriorityHigh},
				domain.InquiryAssigned{Owner: "op1", Team: "support"},
				domain.InquiryStatusChanged{From: domain.StatusTriaged, To: domain.StatusInProgress},
				last,
			}
			data := make([]eventstore.EventData, len(evs))
			for j, e := range evs {
				typ, b, err := domain.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				m, _ := json.Marshal(domain.Metadata{TenantID: tenant, Actor: "op1", CommandID: fmt.Sprint(id, j),
					OccurredAt: base.Add(time.Duration(i*10+j) * time.Minute), SchemaVersion: domain.SchemaVersion})
				data[j] = eventstore.EventData{ID: eventstore.DeterministicID(string(id), j), Type: typ, Data: b, Metadata: m}
			}
			if _, err := tb.store.Append(ctx, eventstore.InquiryStream(tenant, id), eventstore.NoStream(), data); err != nil {
				t.Fatal(err)
			}
		}
		tb.catchUp(t)
		for _, id := range ids {
			agg, err := tb.h.Load(ctx, tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			row, err := tb.reader.Get(ctx, tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			want := queries.Inquiry{ID: agg.ID, Receipt: agg.Receipt, Version: agg.Version, Status: agg.Status, Priority: agg.Priority,
				Owner: agg.Owner, Team: agg.Team, Source: agg.Source, Category: agg.Category, Subject: agg.Subject, Message: agg.Message,
				Requester: &agg.Requester, CreatedAt: agg.CreatedAt.UTC(), UpdatedAt: agg.UpdatedAt.UTC(),
				Archived: agg.Archived, Held: agg.Held, Erased: agg.Erased}
			if !agg.RetainUntil.IsZero() {
				r := agg.RetainUntil.UTC()
				want.RetainUntil = &r
			}
			if !agg.ClosedAt.IsZero() {
				c := agg.ClosedAt.UTC()
				want.ClosedAt = &c
			}
			if diff := cmp.Diff(want, row); diff != "" {
				t.Errorf("%s: query model and aggregate disagree (-aggregate +row):\n%s", id, diff)
			}
		}
		if len(ids) < 13 {
			t.Fatalf("only %d event types tested", len(ids))
		}
	})
}
