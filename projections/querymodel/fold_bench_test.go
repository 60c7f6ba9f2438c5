package querymodel

import (
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
)

// BenchmarkFold measures folding one event into a row through domain.Inquiry.Apply (the shape of
// the synthetic rebuild log: received, triaged, assigned, status changed, noted).
func BenchmarkFold(b *testing.B) {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	k := key{"t1", "i1"}
	evs := []domain.Event{
		domain.InquiryReceived{InquiryID: "i1", TenantID: "t1", Source: domain.SourceAPI, Receipt: "CB-1", Subject: "s", Message: "m",
			Priority: domain.PriorityNormal},
		domain.InquiryTriaged{Priority: domain.PriorityHigh},
		domain.InquiryAssigned{Owner: "op", Team: "support"},
		domain.InquiryStatusChanged{From: domain.StatusTriaged, To: domain.StatusInProgress},
		domain.NoteAdded{Body: "n"},
	}
	ds := make([]decoded, len(evs))
	for i, e := range evs {
		ds[i] = decoded{key: k, version: uint64(i + 1), meta: domain.Metadata{TenantID: "t1", Actor: "op", OccurredAt: at}, event: e, typ: e.EventType()}
	}
	for _, v := range []struct {
		name string
		fold func(map[key]*row, decoded) (timelineRow, bool, error)
	}{{"aggregate", fold}, {"switch", foldSwitch}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rows := map[key]*row{}
				for _, d := range ds {
					if _, _, err := v.fold(rows, d); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ds)), "ns/event")
		})
	}
}

// foldSwitch is the query model's former fold, its own type switch (kept here only as the
// benchmark's baseline; it disagreed with the aggregate on InquiryTriaged and InquiryRouted).
func foldSwitch(rows map[key]*row, d decoded) (timelineRow, bool, error) {
	at := d.meta.OccurredAt.UnixNano()
	tl := timelineRow{tenant: d.key.tenant, id: d.key.id, version: d.version, typ: d.typ, actor: string(d.meta.Actor), at: at, data: d.timeline}
	r := rows[d.key]
	if e, ok := d.event.(domain.InquiryReceived); ok {
		rows[d.key] = &row{tenant: d.key.tenant, id: d.key.id, receipt: e.Receipt, version: d.version, status: string(domain.StatusNew),
			priority: string(e.Priority), source: string(e.Source), cat: e.Category, subject: e.Subject, message: e.Message,
			name: e.Requester.Name, email: e.Requester.Email, created: at, updated: at, dirty: true}
		return tl, true, nil
	}
	switch e := d.event.(type) {
	case domain.InquiryTriaged:
		r.status, r.priority = string(domain.StatusTriaged), string(e.Priority)
	case domain.InquiryStatusChanged:
		r.status = string(e.To)
	case domain.InquiryAssigned:
		r.owner, r.team = string(e.Owner), e.Team
	}
	r.version, r.updated, r.dirty = d.version, at, true
	return tl, true, nil
}
