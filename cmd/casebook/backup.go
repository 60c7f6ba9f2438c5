package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/casebook/casebook/app"
)

// errPgDump answers backup and restore on Postgres, whose tools do both.
var errPgDump = errors.New("casebook backup and restore copy the embedded SQLite database only; on Postgres use " +
	`pg_dump --format=custom --file casebook.dump "$CASEBOOK_DATABASE_URL" and pg_restore, and keep the master key with the dump ` +
	"(docs/operations.md, Backup and restore)")

// copyFlags are backup's and restore's flags: the storage flags that select the data, no others
// (they open no App, so neither a master key nor -v applies).
func copyFlags(name string, stderr io.Writer) (*flag.FlagSet, *storageFlags) {
	fs := flag.NewFlagSet("casebook "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := &storageFlags{}
	fs.StringVar(&sf.dataDir, "data-dir", envOr("CASEBOOK_DATA_DIR", "./casebook-data"), "directory of the embedded SQLite storage (CASEBOOK_DATA_DIR)")
	fs.StringVar(&sf.databaseURL, "database-url", envOr("CASEBOOK_DATABASE_URL", ""), "Postgres URL: refused, use pg_dump (CASEBOOK_DATABASE_URL)")
	fs.StringVar(&sf.eventStoreURL, "eventstore-url", envOr("CASEBOOK_EVENTSTORE_URL", ""), "KurrentDB URL: refused, use its backup (CASEBOOK_EVENTSTORE_URL)")
	return fs, sf
}

// backupCmd writes a consistent copy of the embedded database while a server may run on it.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := copyFlags("backup", stderr)
	to := fs.String("to", "", required+"the backup file to write (refused if it exists, unless --force)")
	force := fs.Bool("force", false, "replace an existing --to file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if sf.databaseURL != "" || sf.eventStoreURL != "" {
		return errPgDump
	}
	info, err := app.Backup(ctx, sf.dataDir, *to, *force)
	if err != nil {
		return err
	}
	return printJSON(stdout, info)
}

// restoreCmd replaces the embedded database with a checked backup, keeping the current one aside.
func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := copyFlags("restore", stderr)
	from := fs.String("from", "", required+"the backup file to restore (checked before anything is replaced)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if sf.databaseURL != "" || sf.eventStoreURL != "" {
		return errPgDump
	}
	res, err := app.Restore(ctx, sf.dataDir, *from, time.Now())
	if errors.Is(err, app.ErrServeRunning) {
		return errors.New(err.Error() + ": stop it, then restore")
	}
	if err != nil {
		return err
	}
	return printJSON(stdout, res)
}
