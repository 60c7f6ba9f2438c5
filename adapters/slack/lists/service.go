package lists

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/casebook/casebook/adapters/slack/slackproj"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Service is the List projection as the app wires it: store, worker, River client and the two
// projections (listintents, listrowmap).
type Service struct {
	Store       *Store
	Worker      *Worker
	Jobs        *river.Client[*sql.Tx]
	Projections []projections.Projection
}

// NewService migrates and wires the List projection. slackproj's tables and River's must exist.
func NewService(ctx context.Context, db *sqldb.DB, events eventstore.Store, secret []byte, now func() time.Time,
	load slackproj.Loader, logger *slog.Logger, poll time.Duration) (*Service, error) {
	st, err := NewStore(ctx, db, events, secret, now)
	if err != nil {
		return nil, err
	}
	w := &Worker{Store: st, Load: load}
	jobs, err := NewClient(db, ClientConfig{Logger: logger, Worker: w, FetchPollInterval: poll})
	if err != nil {
		return nil, err
	}
	return &Service{Store: st, Worker: w, Jobs: jobs, Projections: []projections.Projection{&Intents{Jobs: jobs}, RowMap{}}}, nil
}
