package sqldb

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE (<linux/fs.h>): start writeback of the range's dirty
// pages, and do not wait for it (https://man7.org/linux/man-pages/man2/sync_file_range.2.html).
const syncFileRangeWrite = 0x2

// startWriteback starts writing f's dirty pages, all of them (offset 0, length 0: to the end).
func startWriteback(f *os.File) error {
	return syscall.SyncFileRange(int(f.Fd()), 0, 0, syncFileRangeWrite)
}
