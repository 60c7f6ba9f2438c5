package eventstore

import "context"

// Companion is a row of another table that must commit atomically with an append (the command
// audit entry of an accepted command, an inquiry's new data key). A store that writes companions on
// the database Handle names (CompanionWriter; sqldb.DB.CompanionHandle names one: the embedded
// store's own handle, the Postgres store's pool) inserts the row in the append's own transaction
// (on Postgres its statement), only if the append inserts its events, and calls Written once the
// append has committed; other stores ignore it, and the caller writes the row itself.
type Companion struct {
	Handle  any
	Table   string
	Columns []string
	// Values returns the row's values for an append to stream, one per column.
	Values  func(stream string) []any
	Written func()
	// Taken, when set, is the error the append fails with when the row violates a unique
	// constraint of Table (the row is there already); the append then stores nothing.
	Taken error
	// Order, when set, is the row's unique value that concurrent appends contend for (a claim's
	// name): a store that writes several appends in one transaction orders them by it instead of
	// by their streams, so that two such transactions take their locks in one order.
	Order string
}

// CompanionWriter is implemented by stores that write companions: WritesCompanionsOn reports
// whether a companion naming handle is written in the append's own statement.
type CompanionWriter interface {
	WritesCompanionsOn(handle any) bool
}

type companionKey struct{}

// WithCompanion returns a ctx under which appends carry c, after the companions ctx already carries.
func WithCompanion(ctx context.Context, c *Companion) context.Context {
	prev := CompanionsOf(ctx)
	return context.WithValue(ctx, companionKey{}, append(prev[:len(prev):len(prev)], c))
}

// CompanionsOf returns the companions ctx carries, in the order they were added.
func CompanionsOf(ctx context.Context) []*Companion {
	c, _ := ctx.Value(companionKey{}).([]*Companion)
	return c
}
