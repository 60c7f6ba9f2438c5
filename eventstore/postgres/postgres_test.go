package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/internal/pgtest"
)

// newPool connects to a fresh schema; it is closed when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newStore(t testing.TB, pool *pgxpool.Pool, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.New(t.Context(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	eventstoretest.Exercise(t, func(t *testing.T) eventstore.Store {
		return newStore(t, newPool(t), postgres.Options{})
	}, eventstoretest.Features{})
}
