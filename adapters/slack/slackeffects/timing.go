package slackeffects

import "time"

// Timing paces every effect kind. Zero fields take their defaults (WithDefaults).
type Timing struct {
	// ProbeEvery is how often an open circuit lets one job through as a probe (default 5 min).
	ProbeEvery time.Duration
	// AttemptStale is how old a recorded create attempt must be before another job reconciles it:
	// longer than any in-flight call (default 1 min; the HTTP client times out after 10 s).
	AttemptStale time.Duration
	// InFlightRecheck is how soon a job that found another job's create in flight looks again: by
	// then the other has usually recorded its result (default 2 s; reconciling waits AttemptStale).
	InFlightRecheck time.Duration
	// Quiet is the debounce window: an update is written once its inquiry has not changed for this
	// long (default 2 s; negative disables debouncing). A first post or create is never delayed.
	Quiet time.Duration
	// ClockSkew widens a lookup window (Ledger.Window) on both sides, for the difference between
	// our clock and the one Slack stamps messages with (default 1 min).
	ClockSkew time.Duration
	// MaxDelay bounds the debounce: a change is written at most this long after it happened even
	// while the inquiry keeps changing (default 15 s).
	MaxDelay time.Duration
}

// WithDefaults returns t with its zero fields set to their defaults.
func (t Timing) WithDefaults() Timing {
	if t.ProbeEvery == 0 {
		t.ProbeEvery = 5 * time.Minute
	}
	if t.AttemptStale == 0 {
		t.AttemptStale = time.Minute
	}
	if t.InFlightRecheck == 0 {
		t.InFlightRecheck = min(2*time.Second, t.AttemptStale)
	}
	if t.Quiet == 0 {
		t.Quiet = 2 * time.Second
	}
	if t.ClockSkew == 0 {
		t.ClockSkew = time.Minute
	}
	if t.MaxDelay == 0 {
		t.MaxDelay = 15 * time.Second
	}
	return t
}

// debounce returns how long to wait before writing a change last made at changed whose oldest
// unshown part was made at pending (zero times: no debounce).
func (t Timing) debounce(now, changed, pending time.Time) time.Duration {
	if t.Quiet < 0 || changed.IsZero() {
		return 0
	}
	wait := changed.Add(t.Quiet).Sub(now)
	if !pending.IsZero() {
		wait = min(wait, pending.Add(t.MaxDelay).Sub(now))
	}
	return max(wait, 0)
}
