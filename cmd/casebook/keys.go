package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// MasterKeyLen is the length of a master key: 32 random bytes.
const MasterKeyLen = 32

// masterKeyFlags adds --master-key-file (CASEBOOK_MASTER_KEY_FILE) and the repeatable
// --master-key-previous-file (CASEBOOK_MASTER_KEY_PREVIOUS_FILES, comma-separated) to fs.
func masterKeyFlags(fs *flag.FlagSet, sf *storageFlags) {
	fs.StringVar(&sf.masterKeyFile, "master-key-file", envOr("CASEBOOK_MASTER_KEY_FILE", ""),
		"file holding the master key that wraps every inquiry's data key: 32 random bytes, raw or base64 (CASEBOOK_MASTER_KEY_FILE)")
	if v := envOr("CASEBOOK_MASTER_KEY_PREVIOUS_FILES", ""); v != "" {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				sf.masterKeyPrevious = append(sf.masterKeyPrevious, p)
			}
		}
	}
	fs.Func("master-key-previous-file", "a previous master key's file, to unwrap keys until casebook keys rotate moved them (repeatable; CASEBOOK_MASTER_KEY_PREVIOUS_FILES, comma-separated)",
		func(s string) error { sf.masterKeyPrevious = append(sf.masterKeyPrevious, s); return nil })
}

// readMasterKey reads a master key file: exactly 32 bytes taken as they are, or their standard
// base64 (44 characters, surrounding whitespace ignored). Anything else is refused, naming the file.
func readMasterKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the operator names the key file
	if err != nil {
		return nil, fmt.Errorf("master key file: %w", err)
	}
	if len(b) == MasterKeyLen {
		return b, nil
	}
	if k, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b))); err == nil && len(k) == MasterKeyLen {
		return k, nil
	}
	return nil, fmt.Errorf("master key file %s: want %d random bytes, raw or base64 (for example: head -c 32 /dev/urandom | base64 > %s)",
		path, MasterKeyLen, path)
}

// masterKeys reads the configured master keys: the current one first.
func (sf *storageFlags) masterKeys() ([][]byte, error) {
	if sf.masterKeyFile == "" {
		if len(sf.masterKeyPrevious) > 0 {
			return nil, errors.New("--master-key-previous-file needs --master-key-file: the previous keys are rotated to the current one")
		}
		return nil, nil
	}
	var out [][]byte
	for _, p := range append([]string{sf.masterKeyFile}, sf.masterKeyPrevious...) {
		k, err := readMasterKey(p)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

const keysUsage = `usage:
  casebook keys rotate --master-key-file NEW [--master-key-previous-file OLD]…
      wrap every live data key under NEW and rebuild the requester blind index under it; then OLD can be dropped
  casebook keys seal-legacy [--from POSITION]
      seal the personal fields of inquiry events written before sealing, in place (SQLite and Postgres)`

// keysCmd is `casebook keys rotate|seal-legacy`.
func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "rotate" && args[0] != "seal-legacy") {
		return errors.New(keysUsage)
	}
	fs, sf := newFlags("keys "+args[0], stderr)
	var from *string
	if args[0] == "seal-legacy" {
		from = fs.String("from", "", "resume at this log position (as printed by an earlier run)")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if args[0] == "rotate" && sf.masterKeyFile == "" {
		return errors.New("keys rotate: --master-key-file (CASEBOOK_MASTER_KEY_FILE) names the new master key")
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	if args[0] == "seal-legacy" {
		rep, err := a.SealLegacy(ctx, *from)
		if err != nil {
			return err
		}
		return printJSON(stdout, rep)
	}
	rep, err := a.RotateKeys(ctx)
	if err != nil {
		return err
	}
	return printJSON(stdout, rep)
}
