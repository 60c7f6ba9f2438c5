package projections

import (
	"context"
	"strings"
	"testing"

	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// migrating is a projection whose generations migrate with steps ({g}: the generation suffix).
type migrating struct {
	version int
	steps   []string
}

func (p *migrating) Name() string     { return "migrating" }
func (p *migrating) Version() int     { return p.version }
func (p *migrating) Tables() []string { return []string{"migrating_rows"} }
func (p *migrating) Setup(ctx context.Context, db *sqldb.DB, g Generation) error {
	var ms []sqldb.Migration
	for i, s := range p.steps {
		ms = append(ms, sqldb.Migration{Version: i + 1, SQL: strings.ReplaceAll(s, "{g}", g.Table(""))})
	}
	return sqldb.Migrate(ctx, db, GenerationName(p.Name(), g), ms)
}
func (p *migrating) Apply(context.Context, *Batch) error { return nil }

// TestSetupMigratesTheActiveGeneration: a runner of code that adds a migration (an index) applies
// it to the active generation its version built, at start and once; a generation of another
// version is left for a rebuild.
func TestSetupMigratesTheActiveGeneration(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		_, store := eventstoretest.SQLite(t)
		table := `CREATE TABLE IF NOT EXISTS migrating_rows{g} (id TEXT PRIMARY KEY, n BIGINT NOT NULL)`
		index := func(name string) bool {
			q := `SELECT name FROM sqlite_master WHERE type = 'index' AND name = ?`
			if db.Dialect == sqldb.Postgres {
				q = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?`
			}
			return len(dbtest.Strings(t, db, q, name)) == 1
		}
		setup := func(p *migrating) {
			t.Helper()
			r := &Runner{Store: store, DB: db, Projection: p, Owner: "test"}
			if err := r.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
		}

		setup(&migrating{version: 1, steps: []string{table}})
		if index("migrating_rows_g1_n") {
			t.Fatal("index before its migration")
		}
		later := &migrating{version: 1, steps: []string{table, `CREATE INDEX migrating_rows{g}_n ON migrating_rows{g} (n)`}}
		setup(later)
		if !index("migrating_rows_g1_n") {
			t.Fatal("the active generation did not get the later migration")
		}
		setup(later) // applied once: a second CREATE INDEX would fail

		other := &migrating{version: 2, steps: append(later.steps, `CREATE INDEX migrating_rows{g}_id_n ON migrating_rows{g} (id, n)`)}
		setup(other)
		if index("migrating_rows_g1_id_n") {
			t.Error("a generation of version 1 was migrated by version 2's code, which rebuilds it")
		}
	})
}
