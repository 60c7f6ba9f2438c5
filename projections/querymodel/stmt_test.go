package querymodel_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
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

// TestLookupProbesEachKeyOnce: a batch looks up its inquiries' stored rows with one primary-key
// probe per key, however many tenants the batch spans. (Lists of tenants and of ids probed every
// pair of the two: 32 tenants made 32 times the probes.) Measured in pages read, which depend on
// neither the machine's speed nor its load.
func TestLookupProbesEachKeyOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "qm.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const stored, looked = 512, 64
	pagesPerKey := map[int]float64{}
	for gen, tenants := range map[projections.Generation]int{1: 1, 2: 32} {
		if err := querymodel.New().Setup(ctx, db, gen); err != nil {
			t.Fatal(err)
		}
		var keys [][2]string
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			for i := range stored {
				k := [2]string{fmt.Sprintf("tenant-%02d", i%tenants), fmt.Sprintf("%08d-0000-8000-8000-000000000000", i)}
				if _, err := tx.ExecContext(ctx, `INSERT INTO `+gen.Table("qm_inquiries")+` (tenant_id, id, receipt, version, status,
					priority, source, subject, message, created_at, updated_at) VALUES (?, ?, 'r', 1, 'new', 'normal', 'api', 's', 'm', 1, 1)`, k[0], k[1]); err != nil {
					return err
				}
				if i%(stored/looked) == 0 {
					keys = append(keys, k, [2]string{k[0], k[1] + "-absent"})
				}
			}
			b := &projections.Batch{Tx: tx.Tx, DB: db, Gen: gen}
			if _, err := querymodel.LoadKeys(ctx, b, keys); err != nil { // prepares the statement
				return err
			}
			p0, err := tx.PagesRead()
			if err != nil {
				return err
			}
			found, err := querymodel.LoadKeys(ctx, b, keys)
			if err != nil {
				return err
			}
			p1, err := tx.PagesRead()
			if err != nil {
				return err
			}
			if found != looked {
				t.Errorf("%d tenants: found %d of the %d stored keys", tenants, found, looked)
			}
			pagesPerKey[tenants] = float64(p1-p0) / float64(len(keys))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// About 1.5 pages a key here (a probe near the last one stays on its leaf pages); the pairs of
	// 32 tenants' and 128 ids' lists read 4.5.
	if one, many := pagesPerKey[1], pagesPerKey[32]; many > 3 || many > 1.25*one {
		t.Fatalf("pages read per key looked up: %.1f with 1 tenant, %.1f with 32; want at most 3 and about the same", one, many)
	}
}
