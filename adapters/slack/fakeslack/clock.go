package fakeslack

import (
	"context"
	"sync"
	"time"
)

// Clock is the fake's notion of time: message timestamps, rate-limit windows
// and the delay of a TimeoutAfterApply fault all read it.
type Clock interface {
	Now() time.Time
	// Timer returns a channel that receives once d has passed, and a stop
	// function that releases the timer early.
	Timer(d time.Duration) (<-chan time.Time, func())
}

// SystemClock is wall time, for a fake serving a developer's running service.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Timer(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// ManualClock moves only when told to. Tests use it to open rate-limit
// windows and to release hanging requests without sleeping.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*manualTimer]struct{}
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, timers: map[*manualTimer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Timer fires once Advance has moved the clock d past the current time.
func (c *ManualClock) Timer(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t.ch, func() {}
	}
	c.timers[t] = struct{}{}
	c.notifyLocked()
	return t.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.timers[t]; ok {
			delete(c.timers, t)
			c.notifyLocked()
		}
	}
}

// Advance moves the clock forward by d and fires every timer that is due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	fired := false
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
			fired = true
		}
	}
	if fired {
		c.notifyLocked()
	}
}

// Timers reports how many timers are waiting.
func (c *ManualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are waiting, or ctx ends.
func (c *ManualClock) WaitForTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *ManualClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
