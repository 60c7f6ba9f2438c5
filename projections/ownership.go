package projections

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// DefaultLeaseTTL is the takeover delay after an owner dies.
const DefaultLeaseTTL = 15 * time.Second

func newOwnerID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runGeneration owns gen's lease and applies events until ctx ends or something fails.
func (r *Runner) runGeneration(ctx context.Context, gen Generation) error {
	name := checkpointName(r.Projection, gen)
	r.mu.Lock()
	if r.gen != gen {
		r.gen = gen
		r.status.EverCaughtUp = false
		r.lease = &lease{db: r.DB, name: name, owner: r.Owner, ttl: r.LeaseTTL, now: r.Now}
	}
	l := r.lease
	r.mu.Unlock()
	defer l.release(context.WithoutCancel(ctx))
	if err := r.awaitLease(ctx, l, gen); err != nil {
		return err
	}
	r.setState(StateRunning)
	return r.runOwned(ctx, l, gen)
}

// awaitLease returns once this replica owns l. Meanwhile the status follows the owner's checkpoint.
func (r *Runner) awaitLease(ctx context.Context, l *lease, gen Generation) error {
	for {
		ok, err := l.acquire(ctx)
		if err == nil && ok {
			r.setOwner(true)
			return nil
		}
		r.setState(StateFollowing)
		if err == nil {
			err = r.follow(ctx, gen)
		}
		if errors.Is(err, errGenerationChanged) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("projection lease check failed", "projection", r.Projection.Name(), "err", err)
		}
		if err := sleep(ctx, r.LeaseTTL/3); err != nil {
			return err
		}
	}
}

// follow refreshes a non-owner's status from the shared checkpoint.
func (r *Runner) follow(ctx context.Context, gen Generation) error {
	if err := r.checkGeneration(ctx, gen); err != nil {
		return err
	}
	p, err := Checkpoint(ctx, r.DB, checkpointName(r.Projection, gen))
	if err != nil {
		return err
	}
	return r.update(ctx, p, 0, -1, nil)
}

func (r *Runner) setOwner(v bool) {
	r.mu.Lock()
	r.status.Owner = v
	r.mu.Unlock()
}

// runOwned runs the subscription while renewing the lease and watching the active generation.
func (r *Runner) runOwned(ctx context.Context, l *lease, gen Generation) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(r.LeaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if ok, err := l.acquire(ctx); err == nil && !ok {
					cancel(ErrLeaseLost)
					return
				}
				if err := r.checkGeneration(ctx, gen); errors.Is(err, errGenerationChanged) {
					cancel(err)
					return
				}
			}
		}
	}()
	err := r.subscribe(ctx, l, gen)
	cancel(nil)
	<-done
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) || errors.Is(cause, errGenerationChanged) {
		return cause
	}
	return err
}
