package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// testServer is casebook serve run in-process by run, as the binary runs it.
type testServer struct {
	base string
	stop func() // cancels serve and waits for it to return
	// lines holds every line serve wrote to stderr so far; stdout is kept apart.
	mu     sync.Mutex
	lines  []string
	stdout *syncBuffer
	code   int
}

func (s *testServer) stderrLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServe runs casebook serve on a free loopback port with args added and returns once it
// listens (its "casebook serving" log line); the test's cleanup stops it.
func startServe(t *testing.T, args ...string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	pr, pw := io.Pipe()
	s := &testServer{stdout: &syncBuffer{}}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "casebook serving" {
				addr <- l.Addr
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), s.stdout, pw)
		s.code = exitCode(err, pw)
		_ = pw.Close()
	}()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-done; <-scanned }) }
	t.Cleanup(s.stop)
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-done:
		t.Fatalf("serve exited before listening:\n%s", strings.Join(s.stderrLines(), "\n"))
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start listening")
	}
	return s
}

// newTenant creates tenant acme in dir and an integration principal; it returns the principal's token.
func newTenant(t *testing.T, dir string) string {
	t.Helper()
	if code, _, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCLI(t, "principals", "create", "--tenant", "acme", "--name", "Portal", "--role", "integration", "--data-dir", dir)
	var p struct{ Token string }
	if err := json.Unmarshal([]byte(stdout), &p); code != 0 || err != nil || p.Token == "" {
		t.Fatalf("principals create = %d %s %s", code, stdout, stderr)
	}
	return p.Token
}

// intake submits one inquiry through the portal route and returns its id once acknowledged.
func intake(ctx context.Context, base, token, key string) (string, error) {
	body := fmt.Sprintf(`{"name":"Ada","email":"ada@example.com","external_id":"c-1","subject":"s %s","message":"m"}`, key)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/inquiries", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode/100 != 2 || out.ID == "" {
		return "", fmt.Errorf("intake %s: %d %w", key, resp.StatusCode, err)
	}
	return out.ID, nil
}

// openApp opens the embedded data in dir without a server.
func openApp(t *testing.T, dir string) *app.App {
	t.Helper()
	a, err := app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler), DueTick: -1})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// loadable reports which of ids the data in dir holds as inquiries of tenant acme.
func loadable(t *testing.T, dir string, ids []string) (found, missing []string) {
	t.Helper()
	a := openApp(t, dir)
	defer a.Close()
	ten, err := a.Tenancy.TenantBySlug(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := a.Commands.Load(t.Context(), ten.ID, domain.InquiryID(id)); err == nil {
			found = append(found, id)
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing
}

// TestBackupWhileServing: casebook backup copies the database while serve takes intakes from
// four clients: every intake acknowledged before the backup started is in the copy, the copy
// passes restore's checks, and intakes went on being acknowledged while it was taken.
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	token := newTenant(t, dir)
	srv := startServe(t, "--data-dir", dir, "--portal-rate-limit", "off")

	var mu sync.Mutex
	var acked []string
	backupStarted, backupDone := make(chan struct{}), make(chan struct{})
	var duringBackup int
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	ready := make(chan struct{})
	var readyOnce sync.Once
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-backupDone:
					return
				default:
				}
				id, err := intake(ctx, srv.base, token, fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				acked = append(acked, id)
				select {
				case <-backupStarted:
					duringBackup++
				default:
				}
				n := len(acked)
				mu.Unlock()
				if n >= 100 { // enough written before the backup: start it
					readyOnce.Do(func() { close(ready) })
				}
			}
		})
	}
	select {
	case <-ready:
	case err := <-errc:
		t.Fatal(err)
	}
	mu.Lock()
	before := append([]string(nil), acked...)
	close(backupStarted)
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "casebook.backup")
	code, stdout, stderr := runCLI(t, "backup", "--data-dir", dir, "--to", file)
	close(backupDone)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if code != 0 {
		t.Fatalf("backup = exit %d %s", code, stderr)
	}
	var info app.BackupInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil || info.File != file || info.Bytes <= 0 || info.Events < int64(len(before)) ||
		info.Streams < int64(len(before)) || info.Head < info.Events {
		t.Fatalf("backup printed %s (%v); %d intakes acknowledged before it", stdout, err, len(before))
	}
	known, err := app.KnownMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checked, err := app.CheckBackup(t.Context(), file, known)
	if err != nil || checked != info {
		t.Fatalf("CheckBackup = %+v, %v; backup printed %+v", checked, err, info)
	}
	t.Logf("%d intakes acknowledged before the backup, %d while it ran", len(before), duringBackup)

	restored := filepath.Join(t.TempDir(), "restored")
	if code, _, stderr := runCLI(t, "restore", "--data-dir", restored, "--from", file); code != 0 {
		t.Fatalf("restore into a new directory = exit %d %s", code, stderr)
	}
	if _, missing := loadable(t, restored, before); len(missing) > 0 {
		t.Fatalf("%d of %d intakes acknowledged before the backup are not in it: %v", len(missing), len(before), missing[:min(5, len(missing))])
	}
}

// TestBackupRefusesExistingFile: an existing --to file is kept unless --force, and a backup of a
// directory without data is refused.
func TestBackupRefusesExistingFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	newTenant(t, dir)
	file := filepath.Join(t.TempDir(), "b.db")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "backup", "--data-dir", dir, "--to", file)
	if b, _ := os.ReadFile(file); code != 1 || !strings.Contains(stderr, "--force") || string(b) != "keep me" {
		t.Fatalf("backup over an existing file = exit %d %q, file %q", code, stderr, b)
	}
	if code, _, stderr := runCLI(t, "backup", "--data-dir", dir, "--to", file, "--force"); code != 0 {
		t.Fatalf("backup --force = exit %d %s", code, stderr)
	}
	if _, err := app.CheckBackup(t.Context(), file, nil); err != nil {
		t.Fatal(err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	empty := filepath.Join(t.TempDir(), "none")
	if code, _, stderr := runCLI(t, "backup", "--data-dir", empty, "--to", file+"2"); code != 1 || !strings.Contains(stderr, "no Casebook data in") {
		t.Fatalf("backup of nothing = exit %d %q", code, stderr)
	}
}

// TestRestoreRoundTrip: after a restore the data equals the backup (an intake made after the
// backup is gone, those before are there, the log is the backup's), and the database it replaced
// is kept, whole, in the directory restore names.
func TestRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	newTenant(t, dir)
	submit := func(key string) string {
		a := openApp(t, dir)
		defer a.Close()
		ten, err := a.Tenancy.TenantBySlug(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Commands.Intake(t.Context(), commands.Intake{Tenant: ten.ID, Source: domain.SourceAPI, IdempotencyKey: key,
			Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "s", Message: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.InquiryID)
	}
	kept := []string{submit("k1"), submit("k2")}
	file := filepath.Join(t.TempDir(), "b.db")
	code, stdout, stderr := runCLI(t, "backup", "--data-dir", dir, "--to", file)
	var backed app.BackupInfo
	if err := json.Unmarshal([]byte(stdout), &backed); code != 0 || err != nil {
		t.Fatalf("backup = exit %d %s %s", code, stdout, stderr)
	}
	later := submit("k3")

	code, stdout, stderr = runCLI(t, "restore", "--data-dir", dir, "--from", file)
	var res app.RestoreResult
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
		t.Fatalf("restore = exit %d %s %s", code, stdout, stderr)
	}
	if res.Events != backed.Events || res.Head != backed.Head || res.Streams != backed.Streams || res.File != file ||
		res.DataDir != dir || !strings.HasPrefix(filepath.Base(res.Previous), "pre-restore-") {
		t.Fatalf("restore printed %+v; backup was %+v", res, backed)
	}
	found, missing := loadable(t, dir, append(kept, later))
	if len(found) != 2 || len(missing) != 1 || missing[0] != later {
		t.Fatalf("after restore: found %v, missing %v; want %v and %s", found, missing, kept, later)
	}
	again, err := app.CheckBackup(t.Context(), filepath.Join(dir, app.DBFile), nil)
	if err != nil || again.Events != backed.Events || again.Head != backed.Head {
		t.Fatalf("restored database: %+v %v; backup %+v", again, err, backed)
	}
	if found, missing := loadable(t, res.Previous, append(kept, later)); len(found) != 3 {
		t.Fatalf("the database kept aside lost data: found %v, missing %v", found, missing)
	}
}

// TestRestoreRefusedWhileServing: restore refuses while a serve holds the data directory, and
// changes nothing there.
func TestRestoreRefusedWhileServing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	newTenant(t, dir)
	file := filepath.Join(t.TempDir(), "b.db")
	if code, _, stderr := runCLI(t, "backup", "--data-dir", dir, "--to", file); code != 0 {
		t.Fatal(stderr)
	}
	srv := startServe(t, "--data-dir", dir)
	code, stdout, stderr := runCLI(t, "restore", "--data-dir", dir, "--from", file)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "another casebook serve is running on "+dir) || !strings.Contains(stderr, "stop it") {
		t.Fatalf("restore while serving = exit %d %q %q", code, stdout, stderr)
	}
	assertUntouched(t, dir)
	srv.stop()
	if code, _, stderr := runCLI(t, "restore", "--data-dir", dir, "--from", file); code != 0 {
		t.Fatalf("restore once serve stopped = exit %d %s", code, stderr)
	}
}

// assertUntouched fails if a restore left anything in dir: a kept-aside directory or a staged copy.
func assertUntouched(t *testing.T, dir string) {
	t.Helper()
	for _, pattern := range []string{"pre-restore-*", ".restore-*"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pattern)); len(m) > 0 {
			t.Fatalf("a refused restore left %v", m)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, app.DBFile)); err != nil {
		t.Fatalf("the database: %v", err)
	}
}

// TestRestoreRefusesBadFiles: a file that is not SQLite, a SQLite file that is not Casebook's, a
// corrupt backup and a backup from a newer schema are each refused with a clear error, before
// anything is replaced.
func TestRestoreRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	newTenant(t, dir)
	files := t.TempDir()
	good := filepath.Join(files, "good.db")
	if code, _, stderr := runCLI(t, "backup", "--data-dir", dir, "--to", good); code != 0 {
		t.Fatal(stderr)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Corrupt: every page but the first (the header and schema) overwritten with a pattern.
	corrupt := append([]byte(nil), raw...)
	for i := 4096; i < len(corrupt); i++ {
		corrupt[i] = byte(i * 7)
	}
	other := filepath.Join(files, "other.db")
	odb, err := sqldb.OpenSQLite(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := odb.ExecContext(t.Context(), `CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello')`); err != nil {
		t.Fatal(err)
	}
	if err := odb.Close(); err != nil {
		t.Fatal(err)
	}
	newer := write("newer.db", raw)
	ndb, err := sqldb.OpenSQLite(newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ndb.ExecContext(t.Context(), `INSERT INTO schema_migrations (component, version) VALUES ('eventstore', 9999)`); err != nil {
		t.Fatal(err)
	}
	if err := ndb.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, file, want string }{
		{"text file", write("notes.txt", []byte(strings.Repeat("not a database\n", 400))), "not a Casebook database: not a SQLite database"},
		{"other SQLite", other, "not a Casebook database: it has no schema_migrations table"},
		{"corrupt", write("corrupt.db", corrupt), "integrity check"},
		{"newer schema", newer, "eventstore 9999"},
		{"missing", filepath.Join(files, "nope.db"), "no such file"},
	} {
		code, stdout, stderr := runCLI(t, "restore", "--data-dir", dir, "--from", c.file)
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want one line with %q", c.name, code, stdout, stderr, c.want)
		}
		assertUntouched(t, dir)
	}
	if _, err := app.CheckBackup(t.Context(), newer, nil); err != nil {
		t.Fatalf("the newer-schema file is otherwise sound (so its refusal is the schema's): %v", err)
	}
}

// TestBackupRefusedOnPostgres: backup and restore name pg_dump on Postgres and touch nothing.
func TestBackupRefusedOnPostgres(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "b.db")
	for _, args := range [][]string{
		{"backup", "--to", file, "--database-url", "postgres://nobody@127.0.0.1:1/none"},
		{"restore", "--from", file, "--database-url", "postgres://nobody@127.0.0.1:1/none"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, "pg_dump") || !strings.Contains(stderr, "master key") {
			t.Errorf("%s on Postgres = exit %d %q", args[0], code, stderr)
		}
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup on Postgres wrote %s", file)
	}
}
