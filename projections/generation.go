package projections

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Generation numbers a projection's set of tables.
type Generation int

// Table returns the generation's name for a base table.
func (g Generation) Table(base string) string { return fmt.Sprintf("%s_g%d", base, int(g)) }

// errGenerationChanged restarts a live runner on the newly active generation.
var errGenerationChanged = errors.New("active generation changed")

// GenerationName names a generation's checkpoint, lease, parked set and schema migrations.
func GenerationName(projection string, g Generation) string {
	return fmt.Sprintf("%s@g%d", projection, int(g))
}

func checkpointName(p Projection, g Generation) string { return GenerationName(p.Name(), g) }

// resolveGeneration returns the generation to run. A live runner waits while the active generation
// was built by another version of the projection.
func (r *Runner) resolveGeneration(ctx context.Context) (Generation, error) {
	if r.Build != 0 {
		return r.Build, nil
	}
	for {
		st, err := ensureActive(ctx, r.DB, r.Projection, r.Now())
		if err != nil {
			return 0, err
		}
		r.mu.Lock()
		r.status.Generation, r.status.Version = st.ActiveGen, st.ActiveVersion
		r.mu.Unlock()
		if st.ActiveVersion == r.Projection.Version() {
			r.setState(StateStarting)
			return st.ActiveGen, nil
		}
		r.setState(StateRebuildRequired)
		if err := sleep(ctx, min(r.LeaseTTL/3, time.Second)); err != nil {
			return 0, err
		}
	}
}

// checkGeneration fails with errGenerationChanged when a live runner's generation is no longer
// the active one.
func (r *Runner) checkGeneration(ctx context.Context, gen Generation) error {
	if r.Build != 0 {
		return nil
	}
	st, err := readState(ctx, r.DB, r.DB.DB, r.Projection.Name())
	if err != nil {
		return err
	}
	if st.ActiveGen != gen {
		return errGenerationChanged
	}
	return nil
}

// activeGeneration is the generation reads are served from: the one this runner builds, when it
// builds one, else the projection's active generation as stored, read after the call began
// (concurrent waiters share reads; see coalesce).
func (r *Runner) activeGeneration(ctx context.Context) (Generation, error) {
	if r.Build != 0 {
		return r.Build, nil
	}
	return r.active.Do(ctx, struct{}{}, func(ctx context.Context) (Generation, error) {
		st, err := ReadState(ctx, r.DB, r.Projection.Name())
		return st.ActiveGen, err
	})
}
