//go:build linux

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/queries"
)

// smallDisk mounts a tmpfs of size bytes in a temporary directory and returns its path; the mount
// is detached when the test ends, pass or fail. It skips, saying why, where mounting is not
// allowed (not root, or no CAP_SYS_ADMIN in a container); CI runs as root.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a small tmpfs to fill needs root (CI runs .ci/run as root)")
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs to fill (%v); a container needs CAP_SYS_ADMIN for it", err)
	}
	// Registered after TempDir's removal, so it runs before it; MNT_DETACH also works while the
	// application still holds files open on it.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file at path until the file system has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xAA}, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

type intakeAnswer struct {
	status     int
	code       string
	retryAfter string
	receipt    string
}

// TestDiskFullRefusesAndRecovers: on an embedded data directory whose disk fills up, intakes
// answer 503 storage_full with Retry-After (not 500, and they do answer), every intake
// acknowledged before or during the fill is kept, and once space returns Casebook takes intakes
// again and its subscribers, which started behind on the full disk, catch up with nothing parked,
// all without a restart: a failed commit released SQLite's writer lane and its connection.
func TestDiskFullRefusesAndRecovers(t *testing.T) {
	disk := smallDisk(t, 24<<20)
	ctx := t.Context()
	off := ratelimit.Rate{Off: true}
	cfg := app.Config{DataDir: filepath.Join(disk, "data"), Logger: slog.New(slog.DiscardHandler)}
	cfg.Public.ClientRate, cfg.Public.TenantRate = off, off
	a, err := app.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); cancel(); wg.Wait(); _ = a.Close() })
	tenant, _, _, err := a.Tenancy.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// The client's timeout only turns a hang into a failure; no answer is expected to take long.
	hc := &http.Client{Timeout: 2 * time.Minute}
	message := strings.Repeat("The invoice total is wrong. ", 300)
	n := 0
	intake := func() intakeAnswer {
		t.Helper()
		n++
		body, _ := json.Marshal(map[string]string{"name": "Ada", "email": "ada@example.com",
			"subject": fmt.Sprintf("Invoice %d", n), "message": message})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/public/acme/inquiries", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("disk-%d", n))
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("intake %d: %v", n, err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var m struct {
			Receipt string `json:"receipt"`
			Error   struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &m)
		return intakeAnswer{res.StatusCode, m.Error.Code, res.Header.Get("Retry-After"), m.Receipt}
	}
	var acked []string
	accept := func(phase string, got intakeAnswer) {
		t.Helper()
		if got.status != http.StatusAccepted || got.receipt == "" {
			t.Fatalf("%s: intake = %+v, want 202 with a receipt", phase, got)
		}
		acked = append(acked, got.receipt)
	}
	for range 10 {
		accept("before the fill", intake())
	}

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	// The subscribers start now, behind by every intake so far: their first batches meet the full
	// disk, fail and are retried, never parked.
	for _, r := range a.Runners {
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	// Some intakes may still fit in space SQLite had already taken; the first refusal must be
	// storage_full, and so must every later one while the disk stays full.
	refused := 0
	for i := 0; refused < 3; i++ {
		if i == 2000 {
			t.Fatalf("%d intakes accepted on a full disk; none refused", i)
		}
		got := intake()
		switch {
		case got.status == http.StatusAccepted:
			accept("on the full disk", got)
		case got.status == http.StatusServiceUnavailable && got.code == "storage_full" && got.retryAfter != "":
			refused++
		default:
			t.Fatalf("intake on a full disk = %+v, want 503 storage_full with Retry-After", got)
		}
	}

	for _, r := range a.Runners {
		if st := r.Status(); st.LastError != "" {
			t.Logf("subscriber %s while the disk was full: %s", st.Name, st.LastError)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		accept("after space returned", intake())
	}
	head, err := a.Store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	for _, r := range a.Runners {
		if err := r.WaitFor(wctx, head); err != nil {
			t.Fatalf("subscriber %s did not catch up after space returned: %v (status %+v)", r.Projection.Name(), err, r.Status())
		}
		if st := r.Status(); st.Parked != 0 {
			t.Errorf("subscriber %s parked %d streams during the fill", st.Name, st.Parked)
		}
	}
	for _, receipt := range acked {
		items, _, err := a.Reader.List(ctx, tenant.ID, queries.Filter{Receipt: receipt, Limit: 1})
		if err != nil || len(items) != 1 {
			t.Errorf("acknowledged intake %s is missing after the fill: %v", receipt, err)
		}
	}
	t.Logf("%d intakes acknowledged, %d refused while the disk was full", len(acked), refused)
}
