package projections_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when its tests leave goroutines running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
