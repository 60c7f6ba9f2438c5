package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
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
// and requests reading all the time, that moment may not come until the burst ends, so a durable
// handle bounds the log itself (see RestartLogAfter). Closing the last connection to the file
// checkpoints what is left (SQLite's own rule).
const CheckpointEvery = 100 * time.Millisecond

// RestartLogAfter is how many frames (pages) the write-ahead log may hold before a durable
// handle's checkpoint loop makes SQLite start it over: 192 MB at the default 4 KB page, three
// quarters of WALSizeLimit, which leaves room for the frames written between two checks. Once a
// PASSIVE checkpoint leaves more than this in the log, the loop copies what it can outside the
// writer lane, then takes the lane (no writer of this process adds frames meanwhile) and runs
// RESTART checkpoints, which copy the rest and succeed once no reader is left inside the log;
// readers that begin after the copy read the database file, so the next write starts the log
// over, in place. Writers wait for that copy and its two fsyncs: 4–26 ms measured under a burst
// on two busy cores, once per RestartLogAfter frames. When readers stay in the log past
// RestartLogWait (a long export), the attempt gives up and the loop lets twice as many ticks pass
// before the next, up to MaxRestartBackoff.
const RestartLogAfter = 3 * WALSizeLimit / 4 / 4096

// RestartLogWait bounds how long the RESTART attempts, holding the writer lane, wait for readers.
const RestartLogWait = 5 * time.Millisecond

// MaxRestartBackoff is the longest the loop waits after an attempt gave up before the next.
const MaxRestartBackoff = 5 * time.Second

// checkpointer is a handle's background checkpoint loop.
type checkpointer struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startCheckpointer checkpoints db every CheckpointEvery while dirty reports writes since the
// last time it was asked, until stop is called. After each checkpoint, bound (nil for none) is
// given its result.
func startCheckpointer(db *sql.DB, file *sync.Mutex, dirty func() bool, bound func(WALFrames)) *checkpointer {
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
			if !dirty() {
				continue
			}
			file.Lock()
			f, err := checkpoint(context.Background(), db)
			file.Unlock()
			if err == nil && bound != nil {
				bound(f)
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

// WALStats counts how a durable handle bounded its file's write-ahead log.
type WALStats struct {
	PeakFrames     int    `json:"peak_frames"`      // the longest log a checkpoint has found
	Restarts       uint64 `json:"restarts"`         // RESTART checkpoints that let the next write start it over
	RestartsGaveUp uint64 `json:"restarts_gave_up"` // attempts given up: readers stayed inside the log, or an error
}

// logBound is a durable handle's state for RestartLogAfter (read and written on its checkpoint
// loop; stats also by WALStats).
type logBound struct {
	after int           // frames; RestartLogAfter, smaller in tests
	wait  time.Duration // RestartLogWait, longer in tests

	mu      sync.Mutex
	stats   WALStats
	skip    int // ticks to let pass before the next attempt
	backoff int // ticks the next give-up makes it skip
}

// WALStats reports how db bounded its write-ahead log (zero for replayable and Postgres handles).
func (db *DB) WALStats() WALStats {
	if db.bound == nil {
		return WALStats{}
	}
	db.bound.mu.Lock()
	defer db.bound.mu.Unlock()
	return db.bound.stats
}

// boundLog runs after each checkpoint of a durable handle: it restarts the log (see
// RestartLogAfter) when f leaves more than the bound in it.
func (db *DB) boundLog(f WALFrames) {
	b := db.bound
	b.mu.Lock()
	b.stats.PeakFrames = max(b.stats.PeakFrames, f.Log)
	if f.Log <= b.after {
		b.skip, b.backoff = 0, 0
		b.mu.Unlock()
		return
	}
	if b.skip > 0 {
		b.skip--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	done, err := db.restartLog(context.Background())
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && done {
		b.stats.Restarts++
		b.skip, b.backoff = 0, 0
		return
	}
	b.stats.RestartsGaveUp++
	b.backoff = min(max(2*b.backoff, 1), int(MaxRestartBackoff/CheckpointEvery))
	b.skip = b.backoff
}

// restartLog copies the log outside the writer lane, then runs RESTART checkpoints in it for at
// most the bound's wait; done reports that every frame was copied and no reader is left inside
// the log, so that the next write starts it over. Another handle's checkpoint of the file never
// runs meanwhile (it would make RESTART busy).
func (db *DB) restartLog(ctx context.Context) (done bool, err error) {
	return db.checkpointInLane(ctx, "RESTART", db.bound.wait, func(WALFrames) bool { return true })
}

// checkpointInLane runs `PRAGMA wal_checkpoint(mode)` inside the writer lane, so that no write of
// this process runs meanwhile, retrying every millisecond while SQLite answers busy for at most
// wait. Another handle's checkpoint of the file never runs meanwhile. done reports that the
// checkpoint was not busy and finished(frames) held.
func (db *DB) checkpointInLane(ctx context.Context, mode string, wait time.Duration, finished func(WALFrames) bool) (done bool, err error) {
	db.writers.checkpoints.Lock()
	defer db.writers.checkpoints.Unlock()
	// Copy what has come since the last checkpoint before taking the lane: inside it, the
	// checkpoint then copies only what is written until the lane is free.
	if _, err := checkpoint(ctx, db.DB); err != nil {
		return false, err
	}
	release, _, err := db.enterGate(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	// SQLite's busy handler may sleep a whole second between tries: try at once, and again every
	// millisecond for at most wait.
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return false, err
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = "+strconv.FormatInt(openBusyTimeout.Milliseconds(), 10)); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool without its timeout
		}
	}()
	deadline := time.Now().Add(wait)
	for {
		var busy int
		var f WALFrames
		if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &f.Log, &f.Checkpointed); err != nil {
			return false, err
		}
		if busy == 0 {
			return finished(f), nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(time.Millisecond) // polling SQLite's lock, as its busy handler would; not synchronising
	}
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
	if db.writers != nil {
		db.writers.checkpoints.Lock()
		defer db.writers.checkpoints.Unlock()
	}
	return checkpoint(ctx, db.DB)
}
