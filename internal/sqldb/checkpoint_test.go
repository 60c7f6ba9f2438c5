package sqldb

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// openByHand opens a durable handle on a new file with a table t, its write-ahead log limited to
// walLimit bytes, without the background checkpointer: the test checkpoints by hand.
func openByHand(t *testing.T, walLimit int64) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := openSQLite(path, "FULL", walLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.checkpoints.close()
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// writePage commits row i of t: a page of its own.
func writePage(t *testing.T, db *DB, i int) {
	t.Helper()
	if err := InTx(t.Context(), db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(t.Context(), `INSERT INTO t (id, v) VALUES (?, zeroblob(4000))`, i)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitsDoNotCheckpoint: no commit copies the write-ahead log back into the database file
// (wal_autocheckpoint is off: that copy and its fsync would run inside the committing writer's turn
// of the writer gate); a PASSIVE checkpoint, as the handle's background loop runs, copies all of it.
func TestCommitsDoNotCheckpoint(t *testing.T) {
	t.Parallel()
	db, _ := openByHand(t, WALSizeLimit)
	ctx := t.Context()
	// 1,200 pages and more, each in its own commit: SQLite's default would checkpoint at 1,000.
	for i := range 1200 {
		writePage(t, db, i)
	}
	var log int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&log); err != nil || log != 1200 {
		t.Fatalf("rows = %d, %v", log, err)
	}
	f, err := db.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.Log < 1200 {
		t.Fatalf("the log holds %d frames after 1,200 commits of a page each: a commit checkpointed", f.Log)
	}
	if f.Checkpointed != f.Log {
		t.Fatalf("checkpointed %d of %d frames", f.Checkpointed, f.Log)
	}
}

// TestPagesCountWALFrames: a write transaction's Pages (and the handle's GateStats.Pages) is the
// number of frames its commit appended to the write-ahead log, as the log file's growth shows; a
// transaction that changes nothing writes none.
func TestPagesCountWALFrames(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.db")
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.checkpoints.close() // no checkpoint: the log only grows
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, rows := range []int{0, 1, 10, 50} {
		before, stats := walSize(), db.GateStats()
		var tx *Tx
		if err := InConnTx(ctx, db, func(t *Tx) error {
			tx = t
			for i := range rows {
				if _, err := t.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, zeroblob(3000))`, fmt.Sprintf("%d-%d", rows, i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		frames := (walSize() - before) / (pageSize + 24) // each frame: a 24-byte header and a page
		if int64(tx.Pages()) != frames || db.GateStats().Pages-stats.Pages != tx.Pages() {
			t.Fatalf("%d rows: Pages %d, handle's count +%d; the log grew by %d frames", rows, tx.Pages(), db.GateStats().Pages-stats.Pages, frames)
		}
		if rows > 0 && frames < int64(rows) {
			t.Fatalf("%d rows of 3,000 bytes in %d frames", rows, frames)
		}
		if rows == 0 && frames != 0 {
			t.Fatalf("an empty transaction wrote %d frames", frames)
		}
	}
}

// TestWALCutBackWhenStartedOver: while a reader stays inside the write-ahead log, checkpoints cannot
// let SQLite start the log over, and it grows past the handle's limit; once the reader is gone and
// a checkpoint has copied every frame, the next commit starts the log over and cuts the file back
// to the limit (journal_size_limit), where without it the file would keep its largest size.
func TestWALCutBackWhenStartedOver(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	db, path := openByHand(t, limit)
	ctx := t.Context()
	write := func(i int) { writePage(t, db, i) }
	walSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	write(0)
	reader, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil { // the snapshot starts here
		t.Fatal(err)
	}
	for i := 1; i <= 200; i++ { // about 800 KB of frames, checkpointed as they come
		write(i)
		if _, err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if size := walSize(); size <= 2*limit {
		t.Fatalf("log is %d bytes with a reader inside it: it was started over, the test shows nothing", size)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	if f, err := db.Checkpoint(ctx); err != nil || f.Checkpointed != f.Log {
		t.Fatalf("checkpoint after the reader left: %+v, %v", f, err)
	}
	write(201)
	if size := walSize(); size > limit {
		t.Fatalf("log is %d bytes after it was started over, want at most %d", size, limit)
	}
}

// TestWALBoundedWhileReadersOverlap: readers that overlap (a new one begins before the last ends,
// as subscribers and requests do under load) always leave one inside the log, so a write never
// finds it free and SQLite never starts it over; each write adds to it. A durable handle's bound
// takes the writer lane and waits for those readers (a RESTART checkpoint), so the log stays
// within the bound and a write after each restart starts it over.
func TestWALBoundedWhileReadersOverlap(t *testing.T) {
	t.Parallel()
	const after, writes = 32, 300
	db, _ := openByHand(t, 64<<10)
	db.bound.after, db.bound.wait = after, 10*time.Second
	ctx := t.Context()
	writePage(t, db, 0)

	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() { // one reader inside the log at every moment
		begin := func() (*sql.Tx, error) {
			tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				return nil, err
			}
			var n int
			return tx, tx.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n) // the snapshot starts here
		}
		cur, err := begin()
		for err == nil {
			select {
			case <-stop:
				readerDone <- cur.Rollback()
				return
			default:
			}
			var next *sql.Tx
			if next, err = begin(); err == nil {
				err, cur = cur.Rollback(), next
			}
		}
		readerDone <- err
	}()

	longest := 0
	for i := 1; i <= writes; i++ {
		writePage(t, db, i)
		f, err := db.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		longest = max(longest, f.Log)
		db.boundLog(f)
	}
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	st := db.WALStats()
	t.Logf("longest log %d frames; %+v", longest, st)
	// A page and its table's root per commit: the log passes the bound by at most one commit's
	// frames before the restart that follows it.
	if longest > after+4 {
		t.Errorf("log reached %d frames, bound %d", longest, after)
	}
	if st.Restarts == 0 || st.RestartsGaveUp != 0 {
		t.Errorf("WAL stats %+v: want restarts, none given up", st)
	}
}

// TestWALBoundBacksOffFromALongReader: a reader that stays inside the log makes each attempt give
// up after the bound's wait, and the loop lets 1, 2, 4 … ticks pass before the next attempt
// instead of taking the writer lane at every tick; once the reader has left, the log is started
// over.
func TestWALBoundBacksOffFromALongReader(t *testing.T) {
	t.Parallel()
	const after = 8
	db, _ := openByHand(t, 64<<10)
	db.bound.after, db.bound.wait = after, time.Millisecond
	ctx := t.Context()
	writePage(t, db, 0)
	reader, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	i := 0
	write := func() WALFrames { // a page, then a checkpoint
		t.Helper()
		i++
		writePage(t, db, i)
		f, err := db.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tick := func() WALFrames { // and the loop's bound after it
		t.Helper()
		f := write()
		db.boundLog(f)
		return f
	}
	for write().Log <= after { // the log passes the bound
	}
	var gaveUp []uint64
	for range 8 {
		tick()
		gaveUp = append(gaveUp, db.WALStats().RestartsGaveUp)
	}
	// Attempts at ticks 1, 3 (one skipped), 6 (two skipped): then four are skipped.
	if want := []uint64{1, 1, 2, 2, 2, 3, 3, 3}; !slices.Equal(gaveUp, want) {
		t.Errorf("attempts given up after each tick = %v, want %v", gaveUp, want)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Without the reader, the log is started over within a tick or two (by SQLite itself, or by a
	// restart), and no attempt gives up.
	for range 4 {
		if tick().Log <= after {
			if st := db.WALStats(); st.RestartsGaveUp != 3 {
				t.Errorf("after the reader left: %+v, want no more attempts given up", st)
			}
			return
		}
	}
	t.Fatalf("log not started over after the reader left: %+v", db.WALStats())
}
