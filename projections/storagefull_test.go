package projections

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// fullDisk is the probe on a disk that is full while full is set: applying an event whose data
// holds "full" fails with ENOSPC. failing closes once the event failed three times.
type fullDisk struct {
	*probe
	full    atomic.Bool
	fails   atomic.Int64
	failing chan struct{}
	once    sync.Once
}

func (p *fullDisk) Apply(ctx context.Context, b *Batch) error {
	for _, e := range b.Events {
		if strings.Contains(string(e.Data), "full") && p.full.Load() {
			if p.fails.Add(1) == 3 {
				p.once.Do(func() { close(p.failing) })
			}
			return &fs.PathError{Op: "write", Path: "/data/casebook.db-wal", Err: syscall.ENOSPC}
		}
	}
	return p.probe.Apply(ctx, b)
}

// TestStorageFullIsRetriedNotParked: a batch that fails because the disk is full is the database's
// fault, not its events': even a batch of one stream, which a handler error would park, is
// retried until space returns, and then applied once, with nothing parked.
func TestStorageFullIsRetriedNotParked(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := &fullDisk{probe: &probe{}, failing: make(chan struct{})}
		p.full.Store(true)
		r := &Runner{Store: tb.store, DB: db, Projection: p, RetryDelay: time.Millisecond}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		tb.append(t, "inquiry-a", "full-a0")
		run(t, r)
		// Three failures: the first attempt's batch and event-by-event passes, and a retry, which a
		// parked stream would not get. The timeout only turns a parked stream into a failure.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		select {
		case <-p.failing:
		case <-ctx.Done():
			parked, _ := ListParked(t.Context(), db, p, "")
			t.Fatalf("the full-disk batch was not retried (failures %d, parked %+v)", p.fails.Load(), parked)
		}
		p.full.Store(false)
		waitHead(t, r, tb.store)
		if n := tb.seen(t)[id("inquiry-a", "full-a0")]; n != 1 {
			t.Fatalf("event applied %d times after space returned, want 1", n)
		}
		if parked, err := ListParked(t.Context(), db, p, ""); err != nil || len(parked) != 0 {
			t.Fatalf("parked = %+v, %v; want none", parked, err)
		}
	})
}
