// Package querymodeltest helps tests compare query models.
package querymodeltest

import (
	"testing"

	"github.com/casebook/casebook/internal/sqldb"
)

// Snapshot dumps every row of the active query-model generation, one line per row, in a stable
// order, so two models can be compared with cmp.Diff.
func Snapshot(t testing.TB, db *sqldb.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT tenant_id || '|' || id || '|' || receipt || '|' || version || '|' || status || '|' || priority || '|' || owner ||
			'|' || team || '|' || subject || '|' || updated_at || '|' || coalesce(closed_at, 0) FROM qm_inquiries ORDER BY tenant_id, id`,
		`SELECT tenant_id || '|' || inquiry_id || '|' || version || '|' || type || '|' || actor || '|' || data
			FROM qm_timeline ORDER BY tenant_id, inquiry_id, version`,
	} {
		rows, err := db.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
	}
	return out
}
