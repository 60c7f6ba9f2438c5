package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockDataDir takes an exclusive lock on the data directory's serve.lock, which must exist as a
// directory: the lock one serve (and a restore) holds. While another process holds it the error
// wraps ErrServeRunning. The kernel drops it when the process dies, however it dies, so a restart
// after kill -9 proceeds at once. unlock releases it.
func LockDataDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "serve.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w on %s (or a restore holds it)", ErrServeRunning, dir)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
