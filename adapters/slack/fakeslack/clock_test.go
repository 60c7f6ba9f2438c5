package fakeslack_test

import (
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

func TestManualClock(t *testing.T) {
	t.Parallel()
	start := time.Unix(1700000000, 0)
	c := fakeslack.NewManualClock(start)

	now, _ := c.Timer(0)
	if got := <-now; !got.Equal(start) {
		t.Errorf("Timer(0) fired at %s", got)
	}
	fire, _ := c.Timer(10 * time.Second)
	_, stop := c.Timer(5 * time.Second)
	if err := c.WaitForTimers(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	stop()
	if n := c.Timers(); n != 1 {
		t.Errorf("%d timers after stop, want 1", n)
	}
	c.Advance(9 * time.Second)
	select {
	case <-fire:
		t.Fatal("timer fired early")
	default:
	}
	c.Advance(time.Second)
	if got := <-fire; !got.Equal(start.Add(10 * time.Second)) {
		t.Errorf("fired at %s", got)
	}
	if n := c.Timers(); n != 0 {
		t.Errorf("%d timers left", n)
	}
	if !c.Now().Equal(start.Add(10 * time.Second)) {
		t.Errorf("Now = %s", c.Now())
	}
}
