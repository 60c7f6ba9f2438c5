package sqldb_test

import (
	"runtime"
	"testing"

	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestOpenPostgresPoolSize: a Postgres handle's pool holds twice the process's cores, between 4
// and 16, unless the URL sets its own size.
func TestOpenPostgresPoolSize(t *testing.T) {
	t.Parallel()
	for procs, want := range map[int]int32{1: 4, 2: 4, 3: 6, 5: 10, 8: 16, 9: 16, 64: 16} {
		if got := sqldb.PostgresConns(procs); got != want {
			t.Errorf("a pool on %d cores holds %d connections, want %d", procs, got, want)
		}
	}
	want := sqldb.PostgresConns(runtime.GOMAXPROCS(0))
	if got := sqldb.DefaultPostgresConns(); got != want {
		t.Fatalf("DefaultPostgresConns() = %d with GOMAXPROCS %d, want %d", got, runtime.GOMAXPROCS(0), want)
	}
	url := pgtest.URL(t)
	for _, c := range []struct {
		url  string
		want int32
	}{{url, want}, {url + "&pool_max_conns=3", 3}} {
		db, err := sqldb.OpenPostgres(t.Context(), c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := db.PgxPool().Config().MaxConns; got != c.want {
			t.Errorf("%s: pool of %d connections, want %d", c.url, got, c.want)
		}
		_ = db.Close()
	}
}
