package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
)

// TestCatchUpSaysWhyItIsBehind: a subscriber that does not reach the log's head in time is named
// with where it stands (its position against the head, its state, ownership, parked streams and
// last error), not with the deadline alone.
func TestCatchUpSaysWhyItIsBehind(t *testing.T) {
	t.Parallel()
	a := apptest.Open(t, app.Config{DataDir: t.TempDir()})
	tenant, _, _ := apptest.TenantWithOperator(t, a, "acme")
	apptest.Intake(t, a, tenant, "k1")
	qm := a.QueryModel()
	qm.Hold = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() } // every batch waits
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)        // ends the wait, not a measure
	defer cancel()
	err := a.CatchUp(ctx)
	if err == nil {
		t.Fatal("CatchUp returned with the query model held")
	}
	for _, want := range []string{"projection querymodel did not catch up", " of ", "state ", "owner ", "parked", "last error", "deadline exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
