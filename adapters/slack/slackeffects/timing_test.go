package slackeffects

import (
	"testing"
	"time"
)

// TestDebounce: a change waits for the quiet window, a busy inquiry is written by the maximum
// delay, and a negative window or a zero change time writes at once.
func TestDebounce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	tm := Timing{Quiet: 2 * time.Second, MaxDelay: 15 * time.Second}
	cases := []struct {
		name             string
		timing           Timing
		changed, pending time.Time
		want             time.Duration
	}{
		{"just changed", tm, now, now, 2 * time.Second},
		{"changed 1.5 s ago", tm, now.Add(-1500 * time.Millisecond), now.Add(-1500 * time.Millisecond), 500 * time.Millisecond},
		{"quiet", tm, now.Add(-3 * time.Second), now.Add(-3 * time.Second), 0},
		{"busy for 14 s", tm, now, now.Add(-14 * time.Second), time.Second},
		{"busy past the maximum delay", tm, now, now.Add(-20 * time.Second), 0},
		{"no change time: at once", tm, time.Time{}, time.Time{}, 0},
		{"debounce off", Timing{Quiet: -1, MaxDelay: 15 * time.Second}, now, now, 0},
	}
	for _, c := range cases {
		if got := c.timing.debounce(now, c.changed, c.pending); got != c.want {
			t.Errorf("%s: wait %s, want %s", c.name, got, c.want)
		}
	}
}
