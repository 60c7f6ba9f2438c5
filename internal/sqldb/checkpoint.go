package sqldb

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// CheckpointEvery is how often a SQLite handle copies its file's write-ahead log back into the
// database file (a PASSIVE checkpoint), on its own goroutine.
//
// SQLite's automatic checkpoint (wal_autocheckpoint) would instead run inside whichever commit
// pushed the log past 1000 pages, while that writer still holds the file's writer gate: every other
// writer (intakes included) would wait for the copy and its fsync. Connections are therefore opened
// with wal_autocheckpoint(0), and each handle checkpoints in the background after it has written.
// A PASSIVE checkpoint waits for no reader or writer, exactly like the automatic one, and so copies
// only the frames no reader still needs; SQLite starts the log over at a write that finds every
// frame copied and no reader inside the log. Under a sustained burst of intakes, with subscribers
// and requests reading all the time, that moment may not come until the burst ends: the log grows
// with everything written meanwhile (about 30 KB per intake, all subscribers' output included),
// and is cut back to WALSizeLimit when it is started over. Closing the last connection to the
// file checkpoints what is left (SQLite's own rule).
const CheckpointEvery = 100 * time.Millisecond

// checkpointer is a handle's background checkpoint loop.
type checkpointer struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startCheckpointer checkpoints db every CheckpointEvery while dirty reports writes since the
// last time it was asked, until stop is called.
func startCheckpointer(db *sql.DB, dirty func() bool) *checkpointer {
	c := &checkpointer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(CheckpointEvery)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			if dirty() {
				_, _ = checkpoint(context.Background(), db)
			}
		}
	}()
	return c
}

// close stops the loop and waits for it; closing twice is harmless.
func (c *checkpointer) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

// WALFrames reports the write-ahead log's size in frames and how many of them are checkpointed, as
// a PASSIVE checkpoint run now leaves them.
type WALFrames struct{ Log, Checkpointed int }

// checkpoint runs one PASSIVE checkpoint.
func checkpoint(ctx context.Context, db *sql.DB) (WALFrames, error) {
	var busy int
	var f WALFrames
	err := db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &f.Log, &f.Checkpointed)
	return f, err
}

// Checkpoint runs a PASSIVE checkpoint of a SQLite handle's file now (tests, operators' tools).
func (db *DB) Checkpoint(ctx context.Context) (WALFrames, error) {
	return checkpoint(ctx, db.DB)
}
