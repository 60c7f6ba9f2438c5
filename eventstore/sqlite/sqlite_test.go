package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/sqldb"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	eventstoretest.Exercise(t, func(t *testing.T) eventstore.Store {
		db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "casebook.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s, err := sqlite.New(t.Context(), db, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, eventstoretest.Features{})
}
