package sqldb

import "os"

// walWriteback starts the kernel's writeback of a SQLite file's write-ahead log after a replayable
// handle's commit, once the writer lane is free again. Such commits do not sync (synchronous=NORMAL),
// so their frames stay dirty in the page cache until the next durable commit's fsync, which would
// otherwise write them inside the lane, while appends wait. Starting the writeback changes no
// durability: it only lets the disk work earlier, outside the lane.
type walWriteback struct {
	path string

	started func() // tests: called as each writeback starts
}

// start asks for the log's dirty pages to be written out, without waiting for them, and reports
// whether the kernel took the request. Failures are ignored: the durable commits' fsync writes the
// pages anyway. The log is opened each time: no descriptor to keep and close, and none left on a
// log SQLite deleted (it does when the file's last connection closes) and then made anew.
func (w *walWriteback) start() bool {
	if w.started != nil {
		w.started()
	}
	f, err := os.Open(w.path)
	if err != nil {
		return false
	}
	defer f.Close()
	// Writeback works on the file's pages, whichever descriptor asks.
	return startWriteback(f) == nil
}
