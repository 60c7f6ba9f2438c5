package lists_test

import (
	"context"
	"testing"

	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// intentsBefore is the listintents subscriber as its generations were made before they dropped
// slack_list_desired: the table, behind a view of its base name.
type intentsBefore struct{ *lists.Intents }

func (intentsBefore) Tables() []string { return []string{"slack_list_desired"} }

func (intentsBefore) Setup(ctx context.Context, db *sqldb.DB, gen projections.Generation) error {
	return sqldb.Migrate(ctx, db, projections.GenerationName(lists.IntentsName, gen), []sqldb.Migration{{Version: 1,
		SQL: `CREATE TABLE IF NOT EXISTS ` + gen.Table("slack_list_desired") + ` (tenant_id TEXT NOT NULL, inquiry_id TEXT NOT NULL,
		desired_version BIGINT NOT NULL, PRIMARY KEY (tenant_id, inquiry_id))`}})
}

// TestIntentsDropTheUnreadDesiredTable: a listintents generation made with slack_list_desired
// (which nothing read) loses the table and its view at the next start, and stays the served
// generation: no rebuild.
func TestIntentsDropTheUnreadDesiredTable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		_, store := eventstoretest.SQLite(t)
		objects := func() []string {
			q := `SELECT name FROM sqlite_master WHERE name LIKE 'slack_list_desired%' ORDER BY name`
			if db.Dialect == sqldb.Postgres {
				q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()
					AND table_name LIKE 'slack_list_desired%' ORDER BY table_name`
			}
			return dbtest.Strings(t, db, q)
		}
		setup := func(p projections.Projection) {
			t.Helper()
			r := &projections.Runner{Store: store, DB: db, Projection: p, Owner: "test"}
			if err := r.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		setup(intentsBefore{&lists.Intents{}})
		if got := objects(); len(got) != 2 {
			t.Fatalf("before: %v, want the table and its view", got)
		}
		setup(&lists.Intents{})
		if got := objects(); len(got) != 0 {
			t.Errorf("after: %v, want neither the table nor its view", got)
		}
		d, err := projections.Describe(t.Context(), db, store, &lists.Intents{})
		if err != nil {
			t.Fatal(err)
		}
		if d.State.ActiveGen != 1 || d.NeedsRebuild {
			t.Errorf("after: %+v, want generation 1 served without a rebuild", d)
		}
	})
}
