package dbtest

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// Statements counts the statements a Postgres handle sends to the server, by text (begin and
// commit included): what the server's statement log would show.
type Statements struct {
	mu sync.Mutex
	n  map[string]int
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	s.n[strings.Join(strings.Fields(d.SQL), " ")]++
	s.mu.Unlock()
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Reset forgets what was counted so far.
func (s *Statements) Reset() {
	s.mu.Lock()
	s.n = map[string]int{}
	s.mu.Unlock()
}

// Counts returns the statements counted since the last Reset, by whitespace-normalised text.
func (s *Statements) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}

// Total returns how many statements whose text contains substr (all with "") were counted.
func (s *Statements) Total(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for q, c := range s.n {
		if strings.Contains(q, substr) {
			n += c
		}
	}
	return n
}

// CountingPostgres opens a fresh Postgres schema (see pgtest) through a handle that counts every
// statement it sends. The handle has its own connections (no shared pool).
func CountingPostgres(t *testing.T) (*sqldb.DB, *Statements) {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &Statements{n: map[string]int{}}
	cfg.Tracer = s
	db := &sqldb.DB{DB: stdlib.OpenDB(*cfg), Dialect: sqldb.Postgres}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db, s
}
