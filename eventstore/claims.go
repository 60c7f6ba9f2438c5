package eventstore

import (
	"context"
	"errors"
)

// ErrClaimed is what an append fails with when the name it claims is claimed already; it stores
// nothing.
var ErrClaimed = errors.New("eventstore: the name is claimed by another stream")

// Claimer is implemented by stores that keep claims: unique names, each naming the stream whose
// append claimed it, written in that append's own transaction. An intake claims the name derived
// from its idempotency key for its inquiry's stream, so that the inquiry's id need not be derived
// from the key and can grow with time (see commands.Handler.Intake).
type Claimer interface {
	// Claim returns the option under which an append also claims name for its stream, and true.
	// An append whose name is claimed already stores nothing and fails with ErrClaimed. It
	// returns nil and false when the store keeps no claims.
	Claim(name string) (AppendOption, bool)
	// Claimed returns the stream name was claimed for, "" when it is not claimed.
	Claimed(ctx context.Context, name string) (string, error)
}

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
