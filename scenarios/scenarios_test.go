// Package scenarios runs Casebook end to end: the real binary, real storage, real processes.
package scenarios

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/httptestclient"
	"github.com/casebook/casebook/internal/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "casebook-scenarios-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "casebook")
	build := exec.Command("go", "build", "-o", binary, "../cmd/casebook")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build casebook:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs a one-shot subcommand on the embedded storage and decodes its JSON output.
func cli(t *testing.T, dataDir string, out any, args ...string) {
	t.Helper()
	cliWith(t, out, append(args, "--data-dir", dataDir)...)
}

// cliWith runs a one-shot subcommand and decodes its JSON output.
func cliWith(t *testing.T, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "CASEBOOK_DATA_DIR=")
	b, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("casebook %v: %v\n%s", args, err, stderr)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("casebook %v printed %q: %v", args, b, err)
	}
}

type server struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

// start runs casebook serve on a free loopback port, with env added to its environment, and
// returns once it listens.
// acmeAdmin creates tenant acme in dataDir with the CLI and returns its admin token.
func acmeAdmin(t *testing.T, dataDir string) string {
	t.Helper()
	var tenant struct {
		AdminToken string `json:"admin_token"`
	}
	cli(t, dataDir, &tenant, "tenants", "create", "--slug", "acme")
	return tenant.AdminToken
}

func start(t *testing.T, dataDir string, env ...string) *server {
	t.Helper()
	return startWith(t, env, "--data-dir", dataDir)
}

// startWith runs casebook serve with storage flags, with env added to its environment.
func startWith(t *testing.T, env []string, storage ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, storage...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	// The server's warnings and errors are kept (the last 50) and shown if the test fails.
	var mu sync.Mutex
	var problems []string
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg   string `json:"msg"`
				Addr  string `json:"addr"`
				Level string `json:"level"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line.Msg == "casebook serving" {
				addr <- line.Addr
			}
			if line.Level == "ERROR" || line.Level == "WARN" {
				mu.Lock()
				problems = append(problems[max(0, len(problems)-49):], sc.Text())
				mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
		<-scanned
		if t.Failed() && len(problems) > 0 {
			t.Logf("casebook serve %s warned or failed:\n%s", s.base, strings.Join(problems, "\n"))
		}
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-s.done:
		t.Fatal("casebook serve exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("casebook serve did not start listening")
	}
	return s
}

func (s *server) do(method, path, token, key, body string) (int, map[string]any, error) {
	r := httptestclient.Request{Method: method, Path: path, Token: token, Body: body}
	if key != "" {
		r.Header = map[string]string{"Idempotency-Key": key}
	}
	return httptestclient.Client{Base: s.base}.Do(context.Background(), r)
}

// durableReceipts opens the storage cfg names (no server running) and returns the receipts of every
// InquiryReceived event in the log, and the log's head.
func durableReceipts(t *testing.T, cfg app.Config) (map[string]bool, eventstore.Position) {
	t.Helper()
	a, err := app.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	evs, err := a.Store.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var head eventstore.Position
	for _, r := range evs {
		head = r.Position
		if r.Type != "InquiryReceived" {
			continue
		}
		e, err := domain.Decode(r.Type, 0, r.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[e.(domain.InquiryReceived).Receipt] = true
	}
	return out, head
}

// TestKill9LosesNoAcknowledgedIntake submits a burst of intakes, kills the server with SIGKILL in
// the middle, and checks that every intake answered 202 is in the log and, after a restart, in the
// query API. It also shows that data survives a restart and that the CLI works while serve runs.
func TestKill9LosesNoAcknowledgedIntake(t *testing.T) {
	dataDir := t.TempDir()
	kill9Burst(t, app.Config{DataDir: dataDir}, "--data-dir", dataDir)
}

// TestKill9LosesNoAcknowledgedIntakeOnPostgres is the same with events on Postgres, where
// concurrent appends share one transaction (group commit): an append is answered only after its
// batch commits. The restarted server takes over the killed one's subscribers once their 1 s
// leases expire.
func TestKill9LosesNoAcknowledgedIntakeOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	kill9Burst(t, app.Config{DatabaseURL: url}, "--database-url", url, "--lease-ttl", "1s")
}

// kill9Burst is the kill -9 scenario on the storage that the serve flags and cfg name.
func kill9Burst(t *testing.T, cfg app.Config, storage ...string) {
	var tenant struct {
		Slug       string `json:"slug"`
		AdminToken string `json:"admin_token"`
	}
	cliWith(t, &tenant, append([]string{"tenants", "create", "--slug", "acme"}, storage[:2]...)...)
	// A loopback burst from one address: the public rate limits are off for it.
	srv := startWith(t, []string{"CASEBOOK_INTAKE_RATE_LIMIT=off", "CASEBOOK_INTAKE_TENANT_RATE_LIMIT=off"}, storage...)

	// The CLI works on the same data while the server runs, and the server sees its writes.
	var op struct {
		Token string `json:"token"`
	}
	cliWith(t, &op, append([]string{"principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator"}, storage[:2]...)...)
	if code, _, err := srv.do("GET", "/v1/inquiries", op.Token, "", ""); err != nil || code != 200 {
		t.Fatalf("token minted while serving: %d %v", code, err)
	}

	const workers, killAfter = 8, 150
	var mu sync.Mutex
	acked := map[string]bool{}
	ackedCh := make(chan struct{}, killAfter*4)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"email":"u%d-%d@example.com","subject":"burst","message":"m"}`, w, i)
				code, m, err := srv.do("POST", "/v1/public/acme/inquiries", "", fmt.Sprintf("burst-%d-%d", w, i), body)
				if err != nil {
					return // the server is gone
				}
				if code == http.StatusAccepted {
					mu.Lock()
					acked[m["receipt"].(string)] = true
					mu.Unlock()
					select {
					case ackedCh <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	for range killAfter {
		select {
		case <-ackedCh:
		case <-time.After(60 * time.Second):
			t.Fatal("burst stalled before the kill")
		}
	}
	if err := srv.cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown path runs
		t.Fatal(err)
	}
	<-srv.done
	stop()
	wg.Wait()

	durable, _ := durableReceipts(t, cfg)
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < killAfter {
		t.Fatalf("only %d acknowledged intakes", len(acked))
	}
	for r := range acked {
		if !durable[r] {
			t.Errorf("acknowledged receipt %s is not in the log", r)
		}
	}
	t.Logf("acknowledged %d, durable %d (requests in flight at the kill may be durable without an answer)", len(acked), len(durable))

	// Restart: the query model catches up and lists every durable inquiry.
	srv = startWith(t, nil, storage...)
	listed := map[string]bool{}
	cursor := ""
	for {
		path := "/v1/inquiries?limit=100&consistent=true"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, m, err := srv.do("GET", path, tenant.AdminToken, "", "")
		if err != nil || code != 200 {
			t.Fatalf("list after restart: %d %v %v", code, err, m)
		}
		for _, it := range m["items"].([]any) {
			listed[it.(map[string]any)["receipt"].(string)] = true
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(listed) != len(durable) {
		t.Errorf("query API lists %d inquiries, log holds %d", len(listed), len(durable))
	}
	for r := range acked {
		if !listed[r] {
			t.Errorf("acknowledged receipt %s missing from the query API after restart", r)
		}
	}
}

// TestSecondServeRefused: the embedded store has one server; a second serve on the same data
// directory exits at once with a clear error instead of competing for its subscribers.
func TestSecondServeRefused(t *testing.T) {
	dataDir := t.TempDir()
	start(t, dataDir)
	out, err := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another casebook serve is running") {
		t.Fatalf("second serve: err = %v, output:\n%s", err, out)
	}
}
