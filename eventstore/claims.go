package eventstore

import "errors"

// ErrClaimed is what an append fails with when the name it claims is claimed already; it stores
// nothing.
var ErrClaimed = errors.New("eventstore: the name is claimed by another stream")

// ClaimsTable is the table the SQL stores keep claims in: name (the key) and stream. The migration
// that creates it also claims, for every inquiry stream already in the log, the stream's own name:
// those streams were named by the id their intake derived from its idempotency key, which is the
// name an intake claims, so a redelivery after the upgrade still finds its inquiry.
const ClaimsTable = "stream_claims"

// ClaimCompanion is the Companion that claims name on a store writing companions on handle.
func ClaimCompanion(handle any, name string) *Companion {
	return &Companion{Handle: handle, Table: ClaimsTable, Columns: []string{"name", "stream"},
		Values: func(stream string) []any { return []any{name, stream} }, Taken: ErrClaimed, Order: name}
}
