package projections_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/privacy"
	"github.com/casebook/casebook/projections/schedules"
)

// TestNewInquiriesAddNoSparseIndexEntries: the indexes of what most inquiries lack (the retention
// index's archived, closed and erased times; the clock's breach and due date) hold only the rows
// that have it, so a new inquiry adds no entry to them, on both backends; an index of every row
// holds one entry per inquiry. The statements that read those indexes can still use them.
func TestNewInquiriesAddNoSparseIndexEntries(t *testing.T) {
	t.Parallel()
	const n = 16
	index := func(tenant domain.TenantID, email string) string { return string(tenant) + "/" + email }
	for _, tc := range []struct {
		p      func() projections.Projection
		sparse []string // table and index name, without the generation
		every  string
		query  string // a statement that must be able to use sparse[0]
	}{
		{
			p:      func() projections.Projection { return &privacy.Projection{Index: index} },
			sparse: []string{"privacy_retention erased", "privacy_retention archived", "privacy_retention closed"},
			every:  "privacy_requesters inquiry",
			query:  `SELECT tenant_id, inquiry_id FROM {table} WHERE erased_at >= ? ORDER BY erased_at LIMIT 10`,
		},
		{
			p:      func() projections.Projection { return schedules.New() },
			sparse: []string{"sla_clock breached", "sla_clock due"},
			every:  "sla_clock created",
			query:  `SELECT inquiry_id FROM {table} WHERE tenant_id = ? AND breached = 1`,
		},
	} {
		name := tc.p().Name()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
				tb := newStatementsBundle(t, db, tc.p())
				tb.batchStatements(t, n)
				for _, s := range tc.sparse {
					if got := indexEntries(t, db, s); got != 0 {
						t.Errorf("%s: %d entries for %d new inquiries, want none", s, got, n)
					}
					if db.Dialect == sqldb.Postgres {
						if got := indexPages(t, db, s); got != 0 {
							t.Errorf("%s: %d pages besides the metapage for %d new inquiries, want none", s, got, n)
						}
					}
				}
				if got := indexEntries(t, db, tc.every); got != n {
					t.Errorf("%s: %d entries, want %d", tc.every, got, n)
				}
				table, idx := generationIndex(t, db, tc.sparse[0])
				query := strings.ReplaceAll(tc.query, "{table}", table)
				var args []any
				if strings.Contains(query, "tenant_id = ?") {
					args = append(args, "t-"+name)
				} else {
					args = append(args, int64(0))
				}
				plan := strings.Join(dbtest.IndexPlan(t, db, query, args...), "\n")
				if !strings.Contains(plan, idx) {
					t.Errorf("%s does not use %s:\n%s", query, idx, plan)
				}
			})
		})
	}
}

// generationIndex returns the generation's table and index named by "table index".
func generationIndex(t *testing.T, db *sqldb.DB, name string) (table, index string) {
	t.Helper()
	tbl, suffix, _ := strings.Cut(name, " ")
	q := `SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE ? || '%' AND name LIKE '%' || ?`
	if db.Dialect == sqldb.Postgres {
		q = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE ? || '%' AND indexname LIKE '%' || ?`
	}
	names := dbtest.Strings(t, db, q, tbl+"_g", "_"+suffix)
	if len(names) != 1 {
		t.Fatalf("indexes of %s: %v, want one", name, names)
	}
	return strings.TrimSuffix(names[0], "_"+suffix), names[0]
}

// indexEntries counts the entries of the index named by "table index" (see generationIndex). On
// Postgres, where no catalogue counts them, they are the table's rows that satisfy the index's
// predicate (all rows when it has none): a btree holds one entry per such row.
func indexEntries(t *testing.T, db *sqldb.DB, name string) int {
	t.Helper()
	_, index := generationIndex(t, db, name)
	var n sql.NullInt64
	if db.Dialect == sqldb.Postgres {
		var table string
		var pred sql.NullString
		if err := db.QueryRowContext(t.Context(), `SELECT indrelid::regclass::text, pg_get_expr(indpred, indrelid)
			FROM pg_index WHERE indexrelid = to_regclass($1)`, index).Scan(&table, &pred); err != nil {
			t.Fatal(err)
		}
		if !pred.Valid {
			pred.String = "true"
		}
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM `+table+` WHERE `+pred.String).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int(n.Int64)
	}
	if err := db.QueryRowContext(t.Context(), `SELECT sum(ncell) FROM dbstat WHERE name = ? AND pagetype = 'leaf'`, index).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return int(n.Int64)
}

// indexPages counts a Postgres index's pages besides its metapage: none until a first entry,
// which allocates the root.
func indexPages(t *testing.T, db *sqldb.DB, name string) int {
	t.Helper()
	_, index := generationIndex(t, db, name)
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT pg_relation_size(to_regclass($1)) / current_setting('block_size')::int - 1`, index).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
