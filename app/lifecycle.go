package app

import (
	"context"

	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/seal"
)

// wireKeys opens the inquiry key table in the deployment's SQL database (the SQLite file, or
// Postgres, also when events live in KurrentDB) and wraps the event store so that every personal
// field is sealed with its inquiry's data key before it reaches the backend.
func (a *App) wireKeys(ctx context.Context, secret []byte) error {
	masters := a.Config.DataKeys
	if len(masters) == 0 {
		derived, err := seal.Key(secret, "casebook master data key")
		if err != nil {
			return err
		}
		masters = [][]byte{derived}
	}
	keys, err := sealed.NewKeys(ctx, a.DB, a.Config.Now, masters...)
	if err != nil {
		return err
	}
	a.Keys = keys
	a.Store = sealed.New(a.Store, keys)
	return nil
}
