package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/pgtest"
)

// benchUploadBytes is the size of each file of BenchmarkConcurrentUploads.
const benchUploadBytes = 100 << 20

// BenchmarkConcurrentUploads sends four concurrent 100 MiB uploads (four operators of one tenant,
// multipart bodies generated as they are sent, chunked) through the real HTTP handler over TCP,
// and reports the process's peak resident set while they run (VmHWM, reset before each round
// through /proc/self/clear_refs) as peak-RSS-MB, with the resident set before as base-RSS-MB. The
// target is a peak under 200 MB. SQLite, and Postgres when TEST_DATABASE_URL is set:
//
//	go test -run '^$' -bench BenchmarkConcurrentUploads -benchtime 2x ./adapters/httpapi/
func BenchmarkConcurrentUploads(b *testing.B) {
	backends := map[string]func(b *testing.B) app.Config{
		"sqlite": func(b *testing.B) app.Config { return app.Config{DataDir: b.TempDir()} },
	}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		backends["postgres"] = func(b *testing.B) app.Config { return app.Config{DatabaseURL: pgtest.URL(b)} }
	}
	for name, cfg := range backends {
		b.Run(name, func(b *testing.B) { benchUploads(b, cfg(b)) })
	}
}

func benchUploads(b *testing.B, cfg app.Config) {
	ctx := b.Context()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Public = unlimited
	cfg.Attachments = commands.AttachmentLimits{MaxFileBytes: benchUploadBytes, MaxFiles: 1 << 20, MaxTenantBytes: 1 << 50}
	cfg.Uploads = httpapi.UploadLimits{BytesPerMinutePrincipal: 1 << 40, BytesPerMinuteTenant: 1 << 40}
	a, err := app.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range a.Runners {
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(func() { srv.Close(); cancel(); wg.Wait(); _ = a.Close() })
	if _, _, _, err := a.Tenancy.CreateTenant(ctx, "acme"); err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, 4)
	for i := range tokens {
		if _, tokens[i], err = a.Tenancy.CreatePrincipal(ctx, "acme", "Op "+strconv.Itoa(i), domain.RoleOperator, "support"); err != nil {
			b.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/inquiries", strings.NewReader(portalBody))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokens[0])
	req.Header.Set("Idempotency-Key", "bench-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var created struct{ ID string }
	err = json.NewDecoder(res.Body).Decode(&created)
	_ = res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated {
		b.Fatalf("intake = %d %v", res.StatusCode, err)
	}
	id := created.ID
	var peak, base float64
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		base = max(base, vmStatus(b, "VmRSS"))
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			b.Fatalf("reset the peak RSS: %v", err)
		}
		var up sync.WaitGroup
		for _, tok := range tokens {
			up.Go(func() {
				if err := benchUpload(srv.URL, id, tok); err != nil {
					b.Error(err)
				}
			})
		}
		up.Wait()
		peak = max(peak, vmStatus(b, "VmHWM"))
	}
	b.StopTimer()
	b.ReportMetric(peak/(1<<20), "peak-RSS-MB")
	b.ReportMetric(base/(1<<20), "base-RSS-MB")
	b.ReportMetric(float64(4*benchUploadBytes)*float64(b.N)/b.Elapsed().Seconds()/(1<<20), "MB/s")
	b.ReportMetric(0, "ns/op")
}

// benchUpload streams one benchUploadBytes PNG-typed file (generated, never held whole).
func benchUpload(url, id, token string) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", "scan.png")
		if err == nil {
			_, err = io.Copy(part, io.LimitReader(&pngStream{}, benchUploadBytes))
		}
		if err == nil {
			err = mw.Close()
		}
		_ = pw.CloseWithError(err)
	}()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/inquiries/"+id+"/attachments", pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	var out struct {
		Items []commands.Attachment `json:"items"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated || len(out.Items) != 1 || out.Items[0].Size != benchUploadBytes {
		return &benchError{res.StatusCode, out.Items}
	}
	return nil
}

type benchError struct {
	status int
	items  []commands.Attachment
}

func (e *benchError) Error() string { return "upload = " + strconv.Itoa(e.status) }

// pngStream yields a PNG signature, then a repeating pattern.
type pngStream struct{ n int }

func (p *pngStream) Read(b []byte) (int, error) {
	for i := range b {
		if p.n < len(pngHead) {
			b[i] = pngHead[p.n]
		} else {
			b[i] = byte(p.n*7 + p.n>>8)
		}
		p.n++
	}
	return len(b), nil
}

// vmStatus reads a /proc/self/status field in bytes.
func vmStatus(b *testing.B, field string) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
