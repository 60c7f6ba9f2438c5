package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/pgtest"
)

// TestStorageMetrics: after intakes, /metrics counts the embedded file's write transactions per
// handle (the durable one for appends and audit rows, the replayable one for subscribers) and the
// grouped commits of appends and audit rows and how long they took, exports how the write-ahead log was bounded, and
// counts the events the subscribers read from the store or shared.
func TestStorageMetrics(t *testing.T) {
	t.Parallel()
	value := intakeMetrics(t, app.Config{DataDir: t.TempDir()})
	if v := value(`casebook_sqlite_writer_gate_entered_total{handle="durable"}`); v < 1 {
		t.Errorf("durable gate entries = %v", v)
	}
	if v := value(`casebook_sqlite_writer_gate_entered_total{handle="replayable"}`); v < 1 {
		t.Errorf("replayable gate entries = %v, want the subscribers' batches", v)
	}
	value(`casebook_sqlite_writer_gate_contended_total{handle="durable"}`)
	value(`casebook_sqlite_writer_gate_wait_seconds_total{handle="replayable"}`)
	value(`casebook_sqlite_wal_peak_frames`)
	value(`casebook_sqlite_wal_restarts_total{outcome="restarted"}`)
	value(`casebook_sqlite_wal_restarts_total{outcome="gave_up"}`)
	if v := value(`casebook_subscribe_events_total{source="backend"}`); v < 3 {
		t.Errorf("events the subscribers read from the store = %v, want at least the 3 intakes'", v)
	}
	value(`casebook_subscribe_events_total{source="shared"}`)
}

// TestStorageMetricsOnPostgres: on Postgres the event store's grouped appends are counted and
// timed with the database handle's grouped writes.
func TestStorageMetricsOnPostgres(t *testing.T) {
	t.Parallel()
	intakeMetrics(t, app.Config{DatabaseURL: pgtest.URL(t)})
}

// intakeMetrics serves cfg, makes three public intakes, waits for the query model, checks the
// group commit series of /metrics and returns a lookup of the others.
func intakeMetrics(t *testing.T, cfg app.Config) func(series string) float64 {
	t.Helper()
	a, base := serve(t, cfg)
	if _, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		call(t, "POST", base+"/v1/public/acme/inquiries", "", map[string]string{"Idempotency-Key": fmt.Sprint("m", i)},
			`{"name":"Ada","email":"ada@example.com","subject":"Help","message":"Please"}`, 202)
	}
	head, err := a.Store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.QueryModel().WaitFor(t.Context(), head); err != nil {
		t.Fatal(err)
	}
	b := scrape(a)
	value := func(series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no %s in /metrics", series)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	// Three intakes: three appends (on SQLite each holding its audit row).
	if calls := value(`casebook_group_commit_calls_total`); calls < 3 {
		t.Errorf("grouped calls = %v, want at least 3 (3 appends)", calls)
	}
	if c := value(`casebook_group_commits_total`); c < 1 || c > value(`casebook_group_commit_calls_total`) {
		t.Errorf("group commits = %v", c)
	}
	// Every batch is timed once, and none came near the 15 s limit.
	if n, c := value(`casebook_group_commit_seconds_count`), value(`casebook_group_commits_total`); n != c {
		t.Errorf("timed batches = %v, want every group commit (%v)", n, c)
	}
	if n, c := value(`casebook_group_commit_seconds_bucket{le="15"}`), value(`casebook_group_commits_total`); n != c {
		t.Errorf("batches within 15 s = %v, want every group commit (%v)", n, c)
	}
	if v := value(`casebook_group_commit_timeouts_total`); v != 0 {
		t.Errorf("timed-out batches = %v, want none", v)
	}
	return value
}

// TestAppendAlertRulesNameExportedMetrics: every metric the write path's alert rules use is on
// /metrics, and the rules alert on timed-out batches and on slow ones.
func TestAppendAlertRulesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("../ops/prometheus/appends.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := serve(t, app.Config{DataDir: t.TempDir()})
	metrics := string(scrape(a))
	used := regexp.MustCompile(`casebook_[a-z_]+`).FindAllString(string(rules), -1)
	if len(used) == 0 {
		t.Fatal("the rules use no metric")
	}
	for _, m := range used {
		if !strings.Contains(metrics, "\n"+m+" ") && !strings.Contains(metrics, "\n"+m+"{") {
			t.Errorf("the rules use %s, which /metrics does not export", m)
		}
	}
	for _, expr := range []string{
		"expr: sum(increase(casebook_group_commit_timeouts_total[5m])) > 0",
		"expr: histogram_quantile(0.99, sum by (le) (rate(casebook_group_commit_seconds_bucket[5m]))) > 1",
	} {
		if !strings.Contains(string(rules), expr) {
			t.Errorf("no alert %q", expr)
		}
	}
}

// scrape returns a's /metrics page.
func scrape(a *app.App) []byte {
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.Bytes()
}
