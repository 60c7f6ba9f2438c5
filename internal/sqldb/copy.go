package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// VacuumInto writes a consistent copy of the SQLite file src into dst, which must not exist or be
// empty (SQLite's VACUUM INTO). The copy reads one snapshot in a single read transaction, so in
// WAL mode it waits for no writer and no writer waits for it; the copy holds no free pages and is
// in rollback-journal mode (one self-contained file). It is not synced: the caller syncs dst.
func VacuumInto(ctx context.Context, src, dst string) error {
	db, err := sql.Open("sqlite", "file:"+uriPath(src)+"?_pragma=busy_timeout("+fmt.Sprint(openBusyTimeout.Milliseconds())+")")
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", src, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("sqlite: copy %s: %w", src, err)
	}
	return nil
}

// OpenSQLiteReadOnly opens the SQLite file at path read-only, creating nothing: for checking a
// copy. The caller closes it.
func OpenSQLiteReadOnly(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+uriPath(path)+"?mode=ro&_pragma=busy_timeout("+fmt.Sprint(openBusyTimeout.Milliseconds())+")")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// IsNotADatabase reports whether err is SQLite's answer to a file that is not a database.
func IsNotADatabase(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB
}
