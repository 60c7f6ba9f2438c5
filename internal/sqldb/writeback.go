package sqldb

import (
	"os"
	"sync"
)

// walWriteback starts the kernel's writeback of a SQLite file's write-ahead log after a replayable
// handle's commit, once the writer lane is free again. Such commits do not sync (synchronous=NORMAL),
// so their frames stay dirty in the page cache until the next durable commit's fsync, which would
// otherwise write them inside the lane, while appends wait. Starting the writeback changes no
// durability: it only lets the disk work earlier, outside the lane.
type walWriteback struct {
	path string

	once sync.Once
	f    *os.File // nil when the log could not be opened

	started func() // tests: called as each writeback starts
}

// start asks for the log's dirty pages to be written out, without waiting for them. Failures are
// ignored: the durable commits' fsync writes the pages anyway.
func (w *walWriteback) start() bool {
	w.once.Do(func() {
		// A descriptor of our own: writeback works on the file's pages, whichever descriptor asks.
		w.f, _ = os.Open(w.path)
	})
	if w.started != nil {
		w.started()
	}
	return w.f != nil && startWriteback(w.f) == nil
}

func (w *walWriteback) close() {
	w.once.Do(func() {}) // no open after close
	if w.f != nil {
		_ = w.f.Close()
	}
}
