package eventstore

// Companion is a row of another table that must commit atomically with an append (the command
// audit entry of an accepted command, an inquiry's new data key, a claim). A store that writes
// companions on the database Handle names (Capabilities.CompanionHandle; sqldb.DB.CompanionHandle
// names one: the embedded store's own handle, the Postgres store's pool) inserts the row in the
// append's own transaction (on Postgres its statement), only if the append inserts its events,
// and calls Written once the append has committed; other stores ignore it, and the caller writes
// the row itself.
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

// AppendOption is an optional argument of Store.Append: what one append carries besides its
// events. Decorators pass the options they are given on to the store they wrap, adding their own
// after them.
type AppendOption func(*AppendOptions)

// AppendOptions is what an append's options add up to; backends read it with NewAppendOptions.
type AppendOptions struct {
	// Companions are the rows the append carries, in the order its options named them.
	Companions []*Companion
}

// NewAppendOptions applies opts, in order.
func NewAppendOptions(opts []AppendOption) AppendOptions {
	var o AppendOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithCompanions makes the append carry cs, after the companions of the options before it.
func WithCompanions(cs ...*Companion) AppendOption {
	return func(o *AppendOptions) { o.Companions = append(o.Companions, cs...) }
}
