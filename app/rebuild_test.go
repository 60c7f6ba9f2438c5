package app_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/querymodel"
	"github.com/casebook/casebook/projections/querymodel/querymodeltest"
)

func snapshot(t *testing.T, a *app.App) []string { return querymodeltest.Snapshot(t, a.DB) }

// rebuildUnderLoad rebuilds the query model while intakes and reads run against the server, then
// checks that no request failed and that the result equals a fresh replay of the log.
func rebuildUnderLoad(t *testing.T, cfg app.Config) {
	a, base := serve(t, cfg)
	_, _, admin, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 { // a backlog for the rebuild to replay
		call(t, "POST", base+"/v1/public/acme/inquiries", "", map[string]string{"Idempotency-Key": fmt.Sprint("pre-", i)},
			fmt.Sprintf(`{"email":"p%d@example.com","subject":"s","message":"m"}`, i), 202)
	}
	stop := make(chan struct{})
	var failures atomic.Int64
	var firstFailure atomic.Value
	var requests atomic.Int64
	var wg sync.WaitGroup
	do := func(method, path, token, key, body string, want int) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		requests.Add(1)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			failures.Add(1)
			firstFailure.CompareAndSwap(nil, err.Error())
			return
		}
		_ = res.Body.Close()
		if res.StatusCode != want {
			failures.Add(1)
			firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s %s: %d", method, path, res.StatusCode))
		}
	}
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				do("POST", "/v1/public/acme/inquiries", "", fmt.Sprintf("live-%d-%d", w, i),
					fmt.Sprintf(`{"email":"l%d@example.com","subject":"s","message":"m"}`, i), 202)
				do("GET", "/v1/inquiries?limit=20", admin, "", "", 200)
			}
		})
	}
	res, err := projections.Rebuild(t.Context(), a.Store, a.DB, a.QueryModel().Projection, projections.RebuildOptions{Logger: slog.New(slog.DiscardHandler)})
	close(stop)
	wg.Wait()
	if err != nil || !res.Switched {
		t.Fatalf("rebuild = %+v, %v", res, err)
	}
	if failures.Load() > 0 {
		t.Fatalf("%d of %d requests failed during the rebuild; first: %v", failures.Load(), requests.Load(), firstFailure.Load())
	}
	call(t, "GET", base+"/v1/inquiries?limit=1&consistent=true", admin, nil, "", 200)
	after := snapshot(t, a)
	if len(after) < 100 {
		t.Fatalf("snapshot has %d rows", len(after))
	}
	fresh, err := projections.Rebuild(t.Context(), a.Store, a.DB, a.QueryModel().Projection, projections.RebuildOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil || !fresh.Switched {
		t.Fatalf("fresh replay = %+v, %v", fresh, err)
	}
	if diff := cmp.Diff(after, snapshot(t, a)); diff != "" {
		t.Fatalf("rebuilt-under-load model differs from a fresh replay: %s", diff)
	}
	t.Logf("%d requests during the rebuild, none failed; %d rows", requests.Load(), len(after))
}

func TestRebuildUnderLoadEmbedded(t *testing.T) {
	t.Parallel()
	rebuildUnderLoad(t, app.Config{DataDir: t.TempDir()})
}

func TestRebuildUnderLoadPostgres(t *testing.T) {
	t.Parallel()
	rebuildUnderLoad(t, app.Config{DatabaseURL: pgtest.URL(t)})
}

// TestServeRebuildsStaleProjection: a generation built by another code version keeps the server not
// ready; with RebuildStale the server rebuilds it in the background and becomes ready on the new one.
func TestServeRebuildsStaleProjection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := app.Open(t.Context(), app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	// Pretend the stored generation was built by an older version of the code.
	if _, err := a.DB.ExecContext(t.Context(), `UPDATE projection_state SET active_version = 0 WHERE name = 'querymodel'`); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	b, base := serve(t, app.Config{DataDir: dir, RebuildStale: true})
	call(t, "POST", base+"/v1/public/acme/inquiries", "", nil, `{"email":"a@b.co","subject":"s","message":"m"}`, 202)
	r := b.QueryModel()
	head, err := b.Store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(t.Context(), head); err != nil {
		t.Fatal(err)
	}
	st, err := projections.ReadState(t.Context(), b.DB, "querymodel")
	if err != nil || st.ActiveVersion != querymodel.Version || st.ActiveGen != 2 {
		t.Fatalf("state after the background rebuild = %+v, %v", st, err)
	}
	waitReady(t, base)
}

// waitReady probes /readyz as a load balancer would, until it answers 200 or a deadline passes.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/readyz", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready after 20s (last: %v %v)", res, err)
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
