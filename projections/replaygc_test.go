package projections_test

import (
	"runtime/debug"
	"testing"

	"github.com/casebook/casebook/projections"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
}

func TestTuneGCForReplay(t *testing.T) {
	before := gcPercent()
	t.Run("GOGC empty", func(t *testing.T) {
		t.Setenv("GOGC", "")
		restore := projections.TuneGCForReplay()
		if got := gcPercent(); got != projections.ReplayGCPercent {
			restore()
			t.Fatalf("target %d while replaying, want %d", got, projections.ReplayGCPercent)
		}
		restore()
		if got := gcPercent(); got != before {
			t.Fatalf("target %d after restore, want %d", got, before)
		}
	})
	t.Run("GOGC set", func(t *testing.T) {
		t.Setenv("GOGC", "150")
		restore := projections.TuneGCForReplay()
		defer restore()
		if got := gcPercent(); got != before {
			t.Fatalf("target %d with GOGC set, want the process's %d", got, before)
		}
	})
}
