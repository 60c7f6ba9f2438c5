package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestEmitAll: EmitAll reports which effects are new (a key emitted before, or earlier in the same
// call, is not) and writes any number of them in one statement on Postgres (SQLite: one per
// RowCounts size); a dry run writes nothing and records only the new ones.
func TestEmitAll(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if err := Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		fx := func(keys ...string) []Effect {
			out := make([]Effect, len(keys))
			for i, k := range keys {
				out[i] = Effect{Key: k, Kind: "kind", Tenant: "acme", Payload: "{}"}
			}
			return out
		}
		emit := func(sink *effectSink, effects []Effect) []bool {
			t.Helper()
			var fresh []bool
			err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				b := &Batch{Tx: tx.Tx, DB: db, conn: tx, Now: time.Unix(1, 0), effects: sink}
				var err error
				fresh, err = b.EmitAll(ctx, "probe", effects)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return fresh
		}
		if got, want := emit(nil, fx("a", "b", "a")), []bool{true, true, false}; !cmp.Equal(got, want) {
			t.Fatalf("first call: fresh %v, want %v", got, want)
		}
		many := []string{"b", "c"}
		for i := range 299 {
			many = append(many, fmt.Sprint("m", i))
		}
		n0 := db.Statements()
		got := emit(nil, fx(many...))
		want := make([]bool, len(many))
		for i := 1; i < len(many); i++ {
			want[i] = true
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("second call: fresh (-want +got):\n%s", diff)
		}
		statements := uint64(len(RowCounts(len(many), maxRowsPerStatement)))
		if db.Dialect == sqldb.Postgres {
			statements = 1
		}
		if n := db.Statements() - n0; n != statements {
			t.Fatalf("%d effects took %d statements, want %d", len(many), n, statements)
		}
		sink := &effectSink{dryRun: true}
		if got, want := emit(sink, fx("c", "d", "d")), []bool{false, true, false}; !cmp.Equal(got, want) {
			t.Fatalf("dry run: fresh %v, want %v", got, want)
		}
		if diff := cmp.Diff(fx("d"), sink.recorded()); diff != "" {
			t.Fatalf("dry run recorded (-want +got):\n%s", diff)
		}
		var rows int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM effect_intents WHERE projection = 'probe'`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 2+len(many)-1 {
			t.Fatalf("%d intents stored, want %d (a dry run writes none)", rows, 2+len(many)-1)
		}
	})
}
