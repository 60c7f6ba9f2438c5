package commands_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// BenchmarkIntake measures intake commands/s on the embedded store (each one a durable commit).
func BenchmarkIntake(b *testing.B) {
	tb := setupB(b)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := intake(fmt.Sprint("bench-", n.Add(1)))
			c.Tenant = tb.tenant
			if _, err := tb.h.Intake(b.Context(), c); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}

// BenchmarkTransition measures load → decide → append for lifecycle commands on short streams.
func BenchmarkTransition(b *testing.B) {
	tb := setupB(b)
	ids := make([]domain.InquiryID, b.N)
	for i := range ids {
		c := intake(fmt.Sprint("t-", i))
		c.Tenant = tb.tenant
		r, err := tb.h.Intake(b.Context(), c)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.InquiryID
	}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := ids[next.Add(1)-1]
			_, err := tb.h.Transition(b.Context(), commands.Transition{
				Target: commands.Target{Tenant: tb.tenant, InquiryID: id, Actor: tb.ops[0], IfVersion: ver(1)},
				To:     domain.StatusTriaged,
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}
