package threads

import (
	"context"

	"github.com/casebook/casebook/domain"
)

// Root is an inquiry's thread root as the log records it.
type Root struct {
	Installation string // installation key
	Channel      string
	TS           string
}

// Root returns an inquiry's current thread root, read from its thread events (the log, not a
// projection: a reply decided on it never goes to a root that a lagging mapping still shows). The
// zero Root means no root has been posted yet. Other effect kinds (reminder replies) find the
// thread through it; the wiring hands it to them, as peers never import each other.
func (w *Worker) Root(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (Root, error) {
	th, err := readThread(ctx, w.Effects.Events, tenant, id)
	if err != nil {
		return Root{}, err
	}
	return Root{Installation: th.Installation, Channel: th.Channel, TS: th.TS}, nil
}
