package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore/sealed"
)

// TestMasterKeyFilesAndRotate: a master key file holds 32 random bytes, raw or base64, and any
// other length is refused naming the file; casebook keys rotate moves every live data key from the
// instance-derived master to the file's and then from that master to a new one (the old one given
// as previous), reporting counts and rebuilding the blind index; opening with a master that did not
// wrap the live keys is refused with ErrUnknownMaster (nothing reads as erased); after each
// rotation the inquiry's message opens under the new master alone and export finds its requester.
func TestMasterKeyFilesAndRotate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	keyDir := t.TempDir()
	newKey := func(name string, b64 bool) (string, []byte) {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		p := filepath.Join(keyDir, name)
		if b64 {
			writeFile(t, p, base64.StdEncoding.EncodeToString(k)+"\n")
		} else {
			writeFile(t, p, string(k))
		}
		return p, k
	}
	fileA, keyA := newKey("a.key", false)
	fileB, keyB := newKey("b.key", true)
	bad := filepath.Join(keyDir, "short.key")
	writeFile(t, bad, "0123456789abcdef")

	open := func(masters ...[]byte) (*app.App, error) {
		return app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler), DataKeys: masters})
	}
	a, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Commands.Intake(t.Context(), commands.Intake{Tenant: ten.ID, Source: domain.SourceAPI, IdempotencyKey: "k1",
		Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "s", Message: "Message-Rotor-8812"})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	readable := func(masters ...[]byte) {
		t.Helper()
		a, err := open(masters...)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		q, err := a.Commands.Load(t.Context(), ten.ID, res.InquiryID)
		if err != nil || q.Message != "Message-Rotor-8812" {
			t.Fatalf("message = %q, %v", q.Message, err)
		}
	}

	if code, _, errOut := runCLI(t, "migrate", "--data-dir", dir, "--master-key-file", bad); code == 0 || !strings.Contains(errOut, "want 32 random bytes") {
		t.Fatalf("short key file = %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "keys", "rotate", "--data-dir", dir); code == 0 || !strings.Contains(errOut, "--master-key-file") {
		t.Fatalf("rotate without a key = %d %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "keys", "rotate", "--data-dir", dir, "--master-key-file", fileA)
	if code != 0 || !strings.Contains(out, `"rewrapped": 1`) || !strings.Contains(out, `"`+sealed.KeyID(keyA)+`": 1`) || !strings.Contains(out, `"blind_index_rebuilt": true`) {
		t.Fatalf("rotate to A = %d %s %s", code, out, errOut)
	}
	readable(keyA)

	// B did not wrap anything: refused, clearly, and not as an erasure.
	if _, err := open(keyB); !errors.Is(err, sealed.ErrUnknownMaster) || !strings.Contains(err.Error(), sealed.KeyID(keyA)) {
		t.Fatalf("open with the wrong master: err = %v", err)
	}
	if code, _, errOut := runCLI(t, "migrate", "--data-dir", dir, "--master-key-file", fileB); code == 0 || !strings.Contains(errOut, "not configured") {
		t.Fatalf("migrate with the wrong master = %d %s", code, errOut)
	}

	code, out, errOut = runCLI(t, "keys", "rotate", "--data-dir", dir, "--master-key-file", fileB, "--master-key-previous-file", fileA)
	if code != 0 || !strings.Contains(out, `"rewrapped": 1`) || !strings.Contains(out, `"`+sealed.KeyID(keyB)+`": 1`) {
		t.Fatalf("rotate to B = %d %s %s", code, out, errOut)
	}
	readable(keyB)
	code, out, errOut = runCLI(t, "export", "--data-dir", dir, "--master-key-file", fileB, "--tenant", "acme", "--email", "ADA@example.com")
	if code != 0 || !strings.Contains(out, "Message-Rotor-8812") {
		t.Fatalf("export under B = %d %s %s", code, out, errOut)
	}
	// Nothing was written before sealing here: the migration scans and rewrites nothing.
	code, out, errOut = runCLI(t, "keys", "seal-legacy", "--data-dir", dir, "--master-key-file", fileB)
	if code != 0 || !strings.Contains(out, `"sealed": 0`) || strings.Contains(out, `"scanned": 0`) {
		t.Fatalf("seal-legacy = %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "keys", "seal-legacy", "--data-dir", dir, "--master-key-file", fileB, "--from", "nope"); code == 0 || !strings.Contains(errOut, "position") {
		t.Fatalf("seal-legacy --from nope = %d %s", code, errOut)
	}
}
