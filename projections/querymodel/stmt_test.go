package querymodel_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections/querymodel"
)

// TestFewStatementTextsOnSQLite: batches of every size from 1 to 40 inquiries leave only a few
// multi-row statement texts prepared (row counts in powers of two), so live batches reuse prepared
// statements instead of parsing a statement per row count.
func TestFewStatementTextsOnSQLite(t *testing.T) {
	t.Parallel()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "qm.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	tb := setup(t, db)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = tb.runner.Run(ctx) }()
	defer func() { cancel(); <-done }()
	from := 0
	for n := 1; n <= 40; n++ {
		tb.workload(t, from, n)
		from += n
		head, err := tb.store.Head(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
		err = tb.runner.WaitFor(wctx, head)
		wcancel()
		if err != nil {
			t.Fatalf("projection did not reach %v: %v", head, err)
		}
	}
	if st := tb.runner.Status(); st.Parked != 0 {
		t.Fatalf("parked %d streams", st.Parked)
	}
	// The runtime's own statements, and per statement kind a handful of row-count classes.
	if n := db.CachedStatements(); n > 32 {
		t.Fatalf("%d statement texts prepared after batches of 1 to 40 inquiries, want at most 32 (one per row count was 96)", n)
	}
}

func TestSizeClass(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 17: 32, 1024: 1024} {
		if got := querymodel.SizeClass(n); got != want {
			t.Errorf("sizeClass(%d) = %d, want %d", n, got, want)
		}
	}
}
