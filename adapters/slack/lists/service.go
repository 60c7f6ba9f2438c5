package lists

import (
	"context"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/projections"
)

// Service is the List projection as the app wires it: store, worker (registered on the effect
// runtime), the reconciler (its Inventory set by the wiring) and the two projections (listintents,
// listrowmap).
type Service struct {
	Store       *Store
	Worker      *Worker
	Reconciler  *Reconciler
	Projections []projections.Projection
}

// NewService migrates the List tables and registers the List kinds on rt (before rt.Open).
func NewService(ctx context.Context, rt *slackeffects.Runtime, secret []byte, load slackeffects.Loader) (*Service, error) {
	st, err := NewStore(ctx, rt, secret)
	if err != nil {
		return nil, err
	}
	w := &Worker{Store: st, Load: load}
	if err := Register(rt, w); err != nil {
		return nil, err
	}
	return &Service{Store: st, Worker: w, Reconciler: &Reconciler{Worker: w}, Projections: []projections.Projection{&Intents{Effects: rt}, RowMap{}}}, nil
}
