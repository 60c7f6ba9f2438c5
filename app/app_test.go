package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore/kurrent/kurrenttest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/ratelimit"
)

// serve opens cfg and serves it on a loopback port until the test ends. The public rate limits are
// off: every request comes from one loopback client.
func serve(t *testing.T, cfg app.Config) (*app.App, string) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	off := ratelimit.Rate{Off: true}
	cfg.Public.ClientRate, cfg.Public.TenantRate = off, off
	a, err := app.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = a.Close()
	})
	return a, "http://" + ln.Addr().String()
}

func call(t *testing.T, method, url, token string, headers map[string]string, body string, want int) map[string]any {
	t.Helper()
	// A GET that answers 503 projection_lagging (a consistent read that outwaited the server's
	// bound on a loaded machine) is retried, as the API tells clients to; anything else is final.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, m := do(t, method, url, token, headers, body)
		if status == http.StatusServiceUnavailable && want != status && method == http.MethodGet &&
			errorCode(m) == "projection_lagging" && time.Now().Before(deadline) {
			continue
		}
		if status != want {
			t.Fatalf("%s %s = %d %v, want %d", method, url, status, m, want)
		}
		return m
	}
}

func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func do(t *testing.T, method, url, token string, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// flow runs the lifecycle over HTTP against one storage mode.
func flow(t *testing.T, a *app.App, base string) {
	t.Helper()
	ctx := t.Context()
	_, _, admin, err := a.Tenancy.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	op, opToken, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"name":"Ada","email":"ada@example.com","subject":"Help","message":"Please"}`
	r1 := call(t, "POST", base+"/v1/public/acme/inquiries", "", map[string]string{"Idempotency-Key": "k1"}, body, 202)
	r2 := call(t, "POST", base+"/v1/public/acme/inquiries", "", map[string]string{"Idempotency-Key": "k1"}, body, 202)
	if r1["receipt"] != r2["receipt"] {
		t.Fatalf("replayed intake got another receipt: %v %v", r1, r2)
	}
	list := call(t, "GET", base+"/v1/inquiries?consistent=true", admin, nil, "", 200)
	items := list["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("listed %d inquiries, want 1", len(items))
	}
	id := items[0].(map[string]any)["id"].(string)
	call(t, "POST", base+"/v1/inquiries/"+id+"/transitions", opToken, map[string]string{"If-Match": `"1"`}, `{"to":"triaged"}`, 200)
	call(t, "POST", base+"/v1/inquiries/"+id+"/transitions", opToken, map[string]string{"If-Match": `"1"`}, `{"to":"cancelled","reason":"x"}`, 412)
	call(t, "POST", base+"/v1/inquiries/"+id+"/claim", opToken, nil, "", 200)
	res := call(t, "POST", base+"/v1/inquiries/"+id+"/transitions", opToken, map[string]string{"If-Match": `"4"`}, `{"to":"resolved"}`, 200)
	d := call(t, "GET", base+"/v1/inquiries/"+id+"?min_position="+res["position"].(string), opToken, nil, "", 200)
	if d["status"] != "resolved" || d["owner"] != string(op.ID) || d["version"] != 5.0 {
		t.Fatalf("detail = %v", d)
	}
	tl := call(t, "GET", base+"/v1/inquiries/"+id+"/timeline", opToken, nil, "", 200)
	if n := len(tl["items"].([]any)); n != 5 {
		t.Fatalf("timeline has %d entries, want 5", n)
	}
	// The subscribers catch up asynchronously: readiness is asserted once they have applied
	// every write above, never right after the last one.
	apptest.WaitReady(t, a)
	call(t, "GET", base+"/readyz", "", nil, "", 200)
}

func TestFlowEmbedded(t *testing.T) {
	t.Parallel()
	a, base := serve(t, app.Config{DataDir: t.TempDir()})
	flow(t, a, base)
}

func TestFlowPostgres(t *testing.T) {
	t.Parallel()
	a, base := serve(t, app.Config{DatabaseURL: pgtest.URL(t)})
	if a.Mode() != "postgres" {
		t.Fatalf("mode = %s", a.Mode())
	}
	flow(t, a, base)
}

// TestFlowKurrentDB runs the flow with events in the in-process KurrentDB test server and the rest in
// Postgres.
func TestFlowKurrentDB(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	conn, _ := kurrenttest.Start(t)
	a, base := serve(t, app.Config{DatabaseURL: url, EventStoreURL: conn})
	if a.Mode() != "kurrentdb" {
		t.Fatalf("mode = %s", a.Mode())
	}
	flow(t, a, base)
}

func TestEventStoreURLNeedsDatabaseURL(t *testing.T) {
	t.Parallel()
	_, err := app.Open(t.Context(), app.Config{EventStoreURL: "esdb://127.0.0.1:1?tls=false"})
	if err == nil || !strings.Contains(err.Error(), "--database-url") {
		t.Fatalf("err = %v", err)
	}
}

// TestMetricsOnSeparateAddress: with a metrics address, /metrics is served there only, and the API's
// address answers 404 for it.
func TestMetricsOnSeparateAddress(t *testing.T) {
	t.Parallel()
	mln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, base := serve(t, app.Config{DataDir: t.TempDir(), MetricsListener: mln})
	call(t, "GET", base+"/metrics", "", nil, "", 404)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+mln.Addr().String()+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "casebook_projection_lag_events") {
		t.Fatalf("metrics address: %d %.200s", res.StatusCode, b)
	}
}
