package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/casebook/casebook/internal/sqldb"
)

// BackupInfo describes an embedded database file: the copy Backup wrote, or the file CheckBackup
// checked. Head is the log's last position (0 for an empty log).
type BackupInfo struct {
	File    string `json:"file"`
	Bytes   int64  `json:"bytes"`
	Streams int64  `json:"streams"`
	Events  int64  `json:"events"`
	Head    int64  `json:"head"`
}

// ErrNotCasebook is returned by CheckBackup for a file that is not a Casebook database.
var ErrNotCasebook = errors.New("not a Casebook database")

// ErrBackupExists is returned by Backup when the target exists and force is not set.
var ErrBackupExists = errors.New("backup file exists")

// Backup writes a consistent copy of the embedded database in dataDir to the file to, while a
// server may be writing to it. The copy is taken with VACUUM INTO, which reads one snapshot in a
// single read transaction: in WAL mode no writer waits for it. It is written to a temporary file
// beside to, synced, checked (CheckBackup) and renamed over to; an existing to is refused
// (ErrBackupExists) unless force is set.
func Backup(ctx context.Context, dataDir, to string, force bool) (BackupInfo, error) {
	src := filepath.Join(dataDir, DBFile)
	if _, err := os.Stat(src); err != nil { //nolint:gosec // the operator names the data directory
		if errors.Is(err, os.ErrNotExist) {
			return BackupInfo{}, fmt.Errorf("no Casebook data in %s: nothing to back up", dataDir)
		}
		return BackupInfo{}, err
	}
	if _, err := os.Stat(to); err == nil && !force { //nolint:gosec // the operator names the file
		return BackupInfo{}, fmt.Errorf("%s: %w; pass --force to replace it", to, ErrBackupExists)
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".tmp-*")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	tmpName := tmp.Name()
	_ = tmp.Close() // VACUUM INTO writes into an empty file
	done := false
	defer func() {
		if !done {
			_ = os.Remove(tmpName)
		}
	}()
	if err := sqldb.VacuumInto(ctx, src, tmpName); err != nil {
		return BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(tmpName); err != nil { // VACUUM INTO does not sync what it wrote
		return BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	info, err := CheckBackup(ctx, tmpName, nil)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup: the copy fails its check: %w", err)
	}
	if err := os.Rename(tmpName, to); err != nil {
		return BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	done = true
	if err := syncFile(filepath.Dir(to)); err != nil {
		return BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	info.File = to
	return info, nil
}

// CheckBackup checks that file is a sound Casebook database before anything relies on it: SQLite's
// integrity check passes; it has Casebook's schema; every schema migration it records is in known
// (component → versions this binary has; nil skips this check); no projection's checkpoint is
// past the log's head. It reports the file's size, streams, events and head. A file that is not a
// SQLite database, or not Casebook's, is refused with ErrNotCasebook.
func CheckBackup(ctx context.Context, file string, known map[string][]int) (BackupInfo, error) {
	return checkBackup(ctx, file, file, known)
}

// checkBackup is CheckBackup of path, named file in its errors.
func checkBackup(ctx context.Context, path, file string, known map[string][]int) (BackupInfo, error) {
	st, err := os.Stat(path) //nolint:gosec // the operator names the file
	if err != nil {
		return BackupInfo{}, err
	}
	if !st.Mode().IsRegular() {
		return BackupInfo{}, fmt.Errorf("%s: %w: not a regular file", file, ErrNotCasebook)
	}
	db, err := sqldb.OpenSQLiteReadOnly(path)
	if err != nil {
		return BackupInfo{}, err
	}
	defer db.Close()
	var result string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check(1)`).Scan(&result); err != nil {
		if sqldb.IsNotADatabase(err) {
			return BackupInfo{}, fmt.Errorf("%s: %w: not a SQLite database", file, ErrNotCasebook)
		}
		return BackupInfo{}, fmt.Errorf("%s fails SQLite's integrity check: %w", file, err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check(1)`).Scan(&result); err != nil || result != "ok" {
		return BackupInfo{}, fmt.Errorf("%s fails SQLite's integrity check: %s%v", file, result, orEmpty(err))
	}
	for _, table := range []string{"schema_migrations", "events", "projection_checkpoints"} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil {
			return BackupInfo{}, fmt.Errorf("%s: %w", file, err)
		}
		if n == 0 {
			return BackupInfo{}, fmt.Errorf("%s: %w: it has no %s table", file, ErrNotCasebook, table)
		}
	}
	if known != nil {
		if err := checkMigrations(ctx, db, file, known); err != nil {
			return BackupInfo{}, err
		}
	}
	info := BackupInfo{File: file, Bytes: st.Size()}
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT stream), coalesce(max(seq), 0) FROM events`).
		Scan(&info.Events, &info.Streams, &info.Head); err != nil {
		return BackupInfo{}, fmt.Errorf("%s: count events: %w", file, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT name, commit_pos FROM projection_checkpoints WHERE commit_pos > ? ORDER BY name`, info.Head)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("%s: read checkpoints: %w", file, err)
	}
	defer rows.Close()
	var ahead []string
	for rows.Next() {
		var name string
		var pos int64
		if err := rows.Scan(&name, &pos); err != nil {
			return BackupInfo{}, err
		}
		ahead = append(ahead, fmt.Sprintf("%s at %d", name, pos))
	}
	if err := rows.Err(); err != nil {
		return BackupInfo{}, err
	}
	if len(ahead) > 0 {
		return BackupInfo{}, fmt.Errorf("%s is not a consistent copy: projection checkpoints past the log's head %d: %s",
			file, info.Head, strings.Join(ahead, ", "))
	}
	return info, nil
}

func orEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkMigrations refuses a database that records a schema migration this binary does not have:
// one written by a newer version, which this one would misread.
func checkMigrations(ctx context.Context, db *sql.DB, file string, known map[string][]int) error {
	rows, err := db.QueryContext(ctx, `SELECT component, version FROM schema_migrations ORDER BY component, version`)
	if err != nil {
		return fmt.Errorf("%s: read schema migrations: %w", file, err)
	}
	defer rows.Close()
	var unknown []string
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return err
		}
		if !slices.Contains(known[c], v) {
			unknown = append(unknown, fmt.Sprintf("%s %d", c, v))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%s has schema migrations this casebook does not know (%s): it was written by a newer version; restore it with that version",
			file, strings.Join(unknown, ", "))
	}
	return nil
}

// KnownMigrations reports the schema migrations of this binary, by component: those a new
// embedded database records once Open has migrated it (made in a temporary directory, once per
// process). The caller must not change the map.
func KnownMigrations(ctx context.Context) (map[string][]int, error) {
	knownMu.Lock()
	defer knownMu.Unlock()
	if known != nil {
		return known, nil
	}
	k, err := knownMigrations(ctx)
	if err == nil {
		known = k
	}
	return k, err
}

var (
	knownMu sync.Mutex
	known   map[string][]int
)

func knownMigrations(ctx context.Context) (map[string][]int, error) {
	dir, err := os.MkdirTemp("", "casebook-schema-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	a, err := Open(ctx, Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler), DueTick: -1})
	if err != nil {
		return nil, fmt.Errorf("this binary's schema: %w", err)
	}
	defer a.Close()
	rows, err := a.DB.QueryContext(ctx, `SELECT component, version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	known := map[string][]int{}
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return nil, err
		}
		known[c] = append(known[c], v)
	}
	return known, rows.Err()
}

// RestoreResult is what Restore did.
type RestoreResult struct {
	BackupInfo
	DataDir string `json:"data_dir"`
	// Previous is the directory the database it replaced was moved to ("" if there was none).
	Previous string `json:"previous"`
}

// ErrServeRunning: a casebook serve (or a restore) holds the data directory's lock (LockDataDir).
var ErrServeRunning = errors.New("another casebook serve is running")

// Restore replaces the embedded database in dataDir with the backup from. It takes the data
// directory's serve lock first (refusing while a serve holds it, ErrServeRunning), copies from
// into the directory and checks that copy (CheckBackup against this binary's migrations); only then
// moves the current database, with its write-ahead log, into a directory named for now
// (pre-restore-…), and renames the copy into place. Nothing is replaced if any step before fails.
func Restore(ctx context.Context, dataDir, from string, now time.Time) (RestoreResult, error) {
	if _, err := os.Stat(from); err != nil { //nolint:gosec // the operator names the file
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	unlock, err := LockDataDir(dataDir)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	defer unlock()
	staged, err := copyInto(from, dataDir)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	placed := false
	defer func() {
		if !placed {
			_ = os.Remove(staged)
		}
	}()
	known, err := KnownMigrations(ctx)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	info, err := checkBackup(ctx, staged, from, known) // the copy that goes in place
	// A copy in WAL mode makes the read-only check leave an empty log and index beside it.
	_ = os.Remove(staged + "-wal")
	_ = os.Remove(staged + "-shm")
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	res := RestoreResult{BackupInfo: info, DataDir: dataDir}
	res.File = from
	db := filepath.Join(dataDir, DBFile)
	var aside []string
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if _, err := os.Lstat(db + suffix); err == nil {
			aside = append(aside, DBFile+suffix)
		}
	}
	if len(aside) > 0 {
		res.Previous = filepath.Join(dataDir, "pre-restore-"+now.UTC().Format("20060102T150405Z"))
		if err := os.Mkdir(res.Previous, 0o700); err != nil {
			return RestoreResult{}, fmt.Errorf("restore: keep the current database: %w", err)
		}
		for _, name := range aside {
			if err := os.Rename(filepath.Join(dataDir, name), filepath.Join(res.Previous, name)); err != nil {
				return RestoreResult{}, fmt.Errorf("restore: keep the current database (moved so far to %s: %s): %w",
					res.Previous, strings.Join(aside, ", "), err)
			}
		}
	}
	if err := os.Rename(staged, db); err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w (the previous database is in %s)", err, res.Previous)
	}
	placed = true
	if err := syncFile(dataDir); err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	return res, nil
}

// copyInto copies file into a new temporary file in dir, synced, and returns its name.
func copyInto(file, dir string) (string, error) {
	in, err := os.Open(file) //nolint:gosec // the operator names the file
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, ".restore-*.db")
	if err != nil {
		return "", err
	}
	if _, err := out.ReadFrom(in); err != nil {
		_ = out.Close()
		_ = os.Remove(out.Name())
		return "", err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		_ = os.Remove(out.Name())
		return "", err
	}
	if err := out.Close(); err != nil {
		_ = os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}

// syncFile fsyncs a file or directory.
func syncFile(path string) error {
	f, err := os.Open(path) //nolint:gosec // a path this package chose or the operator named
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
