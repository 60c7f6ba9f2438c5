// Package querymodeltest helps tests compare query models.
package querymodeltest

import (
	"testing"

	"github.com/casebook/casebook/internal/dbtest"
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
		`SELECT tenant_id || '|' || inquiry_id || '|' || version || '|' || type || '|' || actor || '|' || command_id || '|' || data
			FROM qm_timeline ORDER BY tenant_id, inquiry_id, version`,
	} {
		out = append(out, dbtest.Strings(t, db, q)...)
	}
	return out
}
