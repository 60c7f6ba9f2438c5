//go:build !linux

package sqldb

import (
	"errors"
	"os"
)

// startWriteback is Linux's sync_file_range; elsewhere the durable commits' fsync does the writing.
func startWriteback(*os.File) error { return errors.ErrUnsupported }
