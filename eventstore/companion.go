package eventstore

import "context"

// Companion is a row of another table that must commit atomically with an append (the command
// audit entry of an accepted command). A store that supports companions on the database Handle
// names (the Postgres store, whose pool it must be) writes the row in the append's own statement,
// only if the append inserts its events, and calls Written once the append has committed; other
// stores ignore it, and the caller writes the row itself.
type Companion struct {
	Handle  any
	Table   string
	Columns []string
	// Values returns the row's values for an append to stream, one per column.
	Values  func(stream string) []any
	Written func()
}

type companionKey struct{}

// WithCompanion returns a ctx under which appends carry c.
func WithCompanion(ctx context.Context, c *Companion) context.Context {
	return context.WithValue(ctx, companionKey{}, c)
}

// CompanionOf returns the companion ctx carries, or nil.
func CompanionOf(ctx context.Context) *Companion {
	c, _ := ctx.Value(companionKey{}).(*Companion)
	return c
}
