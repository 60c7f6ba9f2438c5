// Package coalesce shares a read among the callers that ask for it at once, without answering any
// caller from a read that began before it asked. A caller that finds no read of its key in flight
// starts one; a caller that arrives while one is in flight waits for the next, which starts when
// that one ends and serves everyone who arrived meanwhile. So each caller sees at least what a
// read of its own made at its arrival would have seen (its own writes, a revocation committed
// before it asked), and a key has at most one read in flight and one queued.
package coalesce

import (
	"context"
	"sync"
	"time"
)

// Timeout bounds a shared read: it runs on its first caller's context without that caller's
// cancellation (the others still wait for it), so only this ends a read that hangs.
const Timeout = time.Minute

// Group coalesces reads by key. The zero value is ready to use.
type Group[K comparable, V any] struct {
	mu   sync.Mutex
	keys map[K]*slot[V]
}

type slot[V any] struct {
	running, queued *call[V]
}

type call[V any] struct {
	ctx     context.Context
	fn      func(context.Context) (V, error)
	done    chan struct{}
	v       V
	err     error
	callers int // callers that asked for it, guarded by Group.mu (tests wait on it)
}

// Do returns the result of a call of fn for key that started after Do was called; concurrent
// callers of one key share calls (the first caller's fn and context values run it). It returns
// ctx.Err() when ctx ends first; the read goes on for the others.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func(context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	if g.keys == nil {
		g.keys = map[K]*slot[V]{}
	}
	s := g.keys[key]
	if s == nil {
		s = &slot[V]{}
		g.keys[key] = s
	}
	var c *call[V]
	switch {
	case s.running == nil:
		c = newCall(ctx, fn)
		s.running = c
		go g.run(key, s)
	case s.queued == nil:
		c = newCall(ctx, fn)
		s.queued = c
	default:
		c = s.queued
	}
	c.callers++
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

func newCall[V any](ctx context.Context, fn func(context.Context) (V, error)) *call[V] {
	return &call[V]{ctx: context.WithoutCancel(ctx), fn: fn, done: make(chan struct{})}
}

// run makes s's running call, then each call queued meanwhile, and drops the key when none is.
func (g *Group[K, V]) run(key K, s *slot[V]) {
	for {
		g.mu.Lock()
		c := s.running
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.ctx, Timeout)
		c.v, c.err = c.fn(ctx)
		cancel()
		close(c.done)
		g.mu.Lock()
		s.running, s.queued = s.queued, nil
		if s.running == nil {
			delete(g.keys, key)
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
}
