package domain

import (
	"fmt"
	"strings"
	"time"
)

// Limits on one inquiry. Every command on an inquiry folds its whole history, so a history that
// grows without bound slows every later command on it; a loop of notes or tiny follow-ups must not
// be able to do that. The limits are decided from the inquiry's own events (their recorded times),
// so every entry point (API, console, Slack) meets the same ones and a replay decides the same.
const (
	// RateWindow is the rolling window of the per-inquiry rate limits.
	RateWindow = time.Hour
	// MaxNotesPerHour bounds notes per inquiry per RateWindow: a note a minute is more than a
	// conversation needs.
	MaxNotesPerHour = 60
	// MaxFollowUpsPerHour bounds follow-up schedulings per inquiry per RateWindow; with
	// MaxPendingFollowUp pending at most, more is a loop, not a plan.
	MaxFollowUpsPerHour = 20
	// MinFollowUpDelay is the shortest time from now a follow-up may be due: a reminder, not a
	// retry loop.
	MinFollowUpDelay = time.Minute
)

// ErrRateLimited: the inquiry took too many commands of one kind within RateWindow (see
// RateLimitError for when to try again).
var ErrRateLimited = fmt.Errorf("rate limited")

// RateLimitError reports a per-inquiry rate limit and when the oldest counted command leaves the
// window. It matches ErrRateLimited.
type RateLimitError struct {
	What       string // "notes", "follow-ups"
	Limit      int
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("at most %d %s per inquiry per %s; try again in %s", e.Limit, e.What,
		strings.TrimPrefix(strings.TrimPrefix(plainDuration(RateWindow), "an "), "a "),
		plainDuration(e.RetryAfter))
}

// plainDuration says d as a person would in these messages: whole hours, else minutes rounded up
// ("an hour", "2 hours", "a minute", "45 minutes"); people read them, not parsers.
func plainDuration(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		if d == time.Hour {
			return "an hour"
		}
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	m := (d + time.Minute - 1) / time.Minute
	if m <= 1 {
		return "a minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

// Is reports ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// recent keeps the times of the last limit commands of a kind, oldest first.
func recent(times []time.Time, at time.Time, limit int) []time.Time {
	if len(times) < limit {
		return append(times, at)
	}
	copy(times, times[len(times)-limit+1:])
	times = times[:limit]
	times[limit-1] = at
	return times
}

// checkRate refuses a command at now when limit commands of its kind were recorded within
// RateWindow before now.
func checkRate(what string, times []time.Time, limit int, now time.Time) error {
	if len(times) < limit {
		return nil
	}
	oldest := times[len(times)-limit]
	if wait := oldest.Add(RateWindow).Sub(now); wait > 0 {
		return &RateLimitError{What: what, Limit: limit, RetryAfter: min(wait, RateWindow)}
	}
	return nil
}
