package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/ratelimit"
)

// TestReplicaWithinItsConnections reproduces an intake answered 500 under load on Postgres
// (seen in scenarios.TestTwoReplicasOnePostgres on the shared test server): a replica had two
// pools (the handle's, up to 32 connections, and the event store's), so a burst made it open
// connections that the server, shared with other replicas and programs, refused, and the intake
// that needed one failed. Here the server grants the replica's role exactly pool_max_conns + 1
// connections (the pool, and the event store's listener): 64 clients' concurrent intakes and reads,
// while every subscriber runs, must all succeed, and the subscribers then apply every intake.
func TestReplicaWithinItsConnections(t *testing.T) {
	t.Parallel()
	const poolSize = 6
	dbURL := limitedRole(t, pgtest.URL(t), poolSize+1)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", fmt.Sprint(poolSize))
	u.RawQuery = q.Encode()
	off := ratelimit.Rate{Off: true}
	a, err := app.Open(t.Context(), app.Config{DatabaseURL: u.String(), Logger: slog.New(slog.DiscardHandler),
		Public: httpapi.PublicConfig{ClientRate: off, TenantRate: off}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, _, token, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	base, stop := apptest.Serve(t, a)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	do := func(method, path, key, body string) (int, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
		} else {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	var wg sync.WaitGroup
	for c := range 64 {
		wg.Go(func() {
			for i := range 4 {
				key := fmt.Sprintf("k-%d-%d", c, i)
				body := fmt.Sprintf(`{"email":"%s@example.com","subject":"s","message":"m"}`, key)
				if code, raw, err := do(http.MethodPost, "/v1/public/acme/inquiries", key, body); err != nil || code != http.StatusAccepted {
					t.Errorf("intake %s: %d %s %v", key, code, raw, err)
					return
				}
				if code, raw, err := do(http.MethodGet, "/v1/inquiries?limit=1", "", ""); err != nil || code != http.StatusOK {
					t.Errorf("read after %s: %d %s %v", key, code, raw, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Every subscriber then applies all of it, within the same connections.
	apptest.CatchUp(t, a)
	var n int
	if err := a.DB.QueryRowContext(t.Context(), `SELECT count(*) FROM qm_inquiries`).Scan(&n); err != nil || n != 64*4 {
		t.Fatalf("query model holds %d inquiries (%v), want %d", n, err, 64*4)
	}
}

// limitedRole creates a login role that may hold at most limit connections, with the rights to
// work in dbURL's schema, and returns dbURL for it. The role and what it owns are dropped when t
// ends.
func limitedRole(t *testing.T, dbURL string, limit int) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	var b [6]byte
	_, _ = rand.Read(b[:])
	role := "casebook_limited_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv(pgtest.EnvVar))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{role}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d", ident, limit)); err != nil {
		t.Skipf("Postgres test skipped: cannot create a role with a connection limit: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, os.Getenv(pgtest.EnvVar))
		if err != nil {
			t.Errorf("drop role: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP OWNED BY "+ident+"; DROP ROLE "+ident); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	if _, err := conn.Exec(ctx, "GRANT USAGE, CREATE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+ident); err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}
