package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/schedules"
	"github.com/casebook/casebook/queries"
	"github.com/casebook/casebook/tenancy"
)

// getStatements answers GET path as token through h and returns the status, the body and the
// statements the request sent.
func getStatements(t *testing.T, h http.Handler, path, token string) (int, map[string]any, []string) {
	t.Helper()
	ctx, log := sqldb.WithStatementLog(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, rec.Body)
	}
	return rec.Code, body, log.Statements()
}

// runQueryModel runs a's query model until the test ends and waits until it has applied the log.
func runQueryModel(t *testing.T, a *app.App) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.QueryModel().Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	head, err := a.Store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.QueryModel().WaitFor(t.Context(), head); err != nil {
		t.Fatal(err)
	}
}

// inquiryToRead opens an app on cfg with one inquiry of tenant "acme", every subscriber caught up
// with it and the query model running, and returns the inquiry and an operator's token.
func inquiryToRead(t *testing.T, cfg app.Config) (*app.App, tenancy.Tenant, domain.InquiryID, string) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	a := apptest.Open(t, cfg)
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := a.Tenancy.CreatePrincipal(t.Context(), "acme", "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	id := apptest.Intake(t, a, ten.ID, "k1")
	apptest.CatchUp(t, a) // the other subscribers' rows: its clock and thread row
	runQueryModel(t, a)
	return a, ten, id, tok
}

// TestConsistentGetStatements: with the query model running and caught up, a consistent GET of
// one inquiry sends four statements (the token's principal, the log's head, the query model's
// active generation, and the inquiry with its clock and what its Slack state, due jobs and
// attachments hold), and a plain one two; an inquiry without Slack state, due jobs or
// attachments needs no other read. Counted on both backends (on SQLite: the statements run through
// sqldb's handles).
func TestConsistentGetStatements(t *testing.T) {
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		a, _, id, tok := inquiryToRead(t, cfg)
		h := a.Handler()
		for _, c := range []struct {
			query string
			max   int
		}{{"?consistent=true", 4}, {"", 2}} {
			code, body, stmts := getStatements(t, h, "/v1/inquiries/"+string(id)+c.query, tok)
			if code != http.StatusOK || body["id"] != string(id) || body["subject"] != "Invoice twice" {
				t.Fatalf("GET%s = %d %v", c.query, code, body)
			}
			if n := len(stmts); n < 2 || !strings.Contains(stmts[0], "api_tokens") || !strings.Contains(stmts[n-1], "FROM qm_inquiries") {
				t.Fatalf("GET%s: the log missed the principal's or the inquiry's read: %q", c.query, stmts)
			}
			if len(stmts) > c.max {
				t.Errorf("GET%s sent %d statements, want at most %d:\n%s", c.query, len(stmts), c.max, strings.Join(stmts, "\n"))
			}
			slack, _ := body["slack"].(map[string]any)
			if slack["state"] != "disabled" || body["attachments"] == nil || body["pending_jobs"] == nil || body["sla"] == nil {
				t.Errorf("GET%s body lacks a part: %v", c.query, body)
			}
		}
	})
}

// TestDetailIsTenantScoped: another tenant's clock, due jobs, thread, effect outcome, destination,
// List and attachment rows for the same inquiry id count for nothing in Detail, and that tenant
// does not find the inquiry; the same rows in the inquiry's own tenant are found.
func TestDetailIsTenantScoped(t *testing.T) {
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		cfg.Logger = slog.New(slog.DiscardHandler)
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		acme, _, _, err := a.Tenancy.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		other, _, _, err := a.Tenancy.CreateTenant(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		id := apptest.Intake(t, a, acme.ID, "k1")
		runQueryModel(t, a) // and no other subscriber: no clock or thread row yet
		all := queries.DetailParts{Slack: true, Due: true, Attachments: true}
		want := func(tenant domain.TenantID, clock bool, jobs bool, slack queries.SlackPresence, files bool) {
			t.Helper()
			d, err := a.Reader.Detail(ctx, acme.ID, id, all)
			if err != nil {
				t.Fatal(err)
			}
			if d.Inquiry.ID != id || (d.Clock != nil) != clock || d.DueJobs != jobs || d.Slack != slack || d.Attachments != files {
				t.Fatalf("after rows of %s: detail = clock %v, jobs %v, slack %+v, attachments %v", tenant, d.Clock, d.DueJobs, d.Slack, d.Attachments)
			}
			if d.Clock != nil && (d.Clock.Team != "support" || d.Clock.EscalationLevel != 2 || len(d.Clock.Watchers) != 1) {
				t.Fatalf("clock = %+v", *d.Clock)
			}
		}
		want("nobody", false, false, queries.SlackPresence{}, false)
		if _, err := a.Reader.Detail(ctx, other.ID, id, all); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("another tenant's detail of the id: %v, want not found", err)
		}
		table := func(projection, base string) string {
			st, err := projections.ReadState(ctx, a.DB, projection)
			if err != nil {
				t.Fatal(err)
			}
			return st.ActiveGen.Table(base)
		}
		rows := func(tenant domain.TenantID) {
			t.Helper()
			for _, q := range []string{
				`INSERT INTO ` + table(schedules.Name, "sla_clock") + ` (tenant_id, inquiry_id, version, state, status, priority, team, created_at,
					escalation_level, watchers) VALUES (?, ?, 1, 'running', 'new', 'normal', 'support', 1, 2, '["p1"]')`,
				`INSERT INTO due_jobs (id, tenant_id, inquiry_id, kind, due_at, time_zone, payload_class, recipient_policy, generation,
					state, max_attempts, created_at, updated_at) VALUES (? || '-job', ?, ?, 'follow_up', 1, 'UTC', 'internal', 'owner_watchers', 1, 'claimed', 3, 1, 1)`,
				`INSERT INTO ` + table(threads.IntentsName, "slack_threads") + ` (tenant_id, inquiry_id, desired_version, observed_version, channel_id)
					VALUES (?, ?, 7, 5, 'C9')`,
				`INSERT INTO slack_effect_health (tenant_id, inquiry_id, kind, installation, destination, last_error)
					VALUES (?, ?, 'thread_sync', 'inst', 'C1', 'boom')`,
				`INSERT INTO slack_destinations (id, tenant_id, installation_id, channel_id, clearance, active, created_at)
					VALUES (? || '-dest', ?, 'inst', 'C1', 'internal', 1, 1)`,
				`INSERT INTO slack_list_projections (tenant_id, list_id, installation_id, clearance, state, updated_at)
					VALUES (?, 'L1', 'inst', 'internal', 'disabled', 1)`,
				`INSERT INTO inquiry_attachments (tenant_id, inquiry_id, id, name, content_type, size, sha256, added_by, created_at, data)
					VALUES (?, ?, 'att1', 'a.txt', 'text/plain', 1, 'x', 'p1', 1, ?)`,
			} {
				args := []any{tenant, id}
				switch {
				case strings.Contains(q, "due_jobs"):
					args = []any{tenant, tenant, id}
				case strings.Contains(q, "slack_destinations"):
					args = []any{tenant, tenant}
				case strings.Contains(q, "slack_list_projections"):
					args = []any{tenant}
				case strings.Contains(q, "inquiry_attachments"):
					args = append(args, []byte("x"))
				}
				if _, err := a.DB.ExecContext(ctx, a.DB.Rebind(q), args...); err != nil {
					t.Fatalf("%v\n%s", err, q)
				}
			}
		}
		rows(other.ID)
		want(other.ID, false, false, queries.SlackPresence{}, false)
		rows(acme.ID)
		want(acme.ID, true, true, queries.SlackPresence{Desired: 7, Observed: 5, Channel: "C9", Outcome: true, Destination: true, Lists: true}, true)
	})
}

// TestDetailReadsByKey: the detail statement a GET sends reads every table through an index on
// the caller's tenant and id, never by scanning one. On Postgres sequential scans are disabled for
// the EXPLAIN, so a plan that still holds one had no usable index (as when a part was joined to
// the query model's "C"-collated columns); on SQLite no table is SCANned.
func TestDetailReadsByKey(t *testing.T) {
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		a, ten, id, tok := inquiryToRead(t, cfg)
		ctx := t.Context()
		code, _, stmts := getStatements(t, a.Handler(), "/v1/inquiries/"+string(id), tok)
		if code != http.StatusOK || len(stmts) == 0 || !strings.Contains(stmts[len(stmts)-1], "FROM qm_inquiries") {
			t.Fatalf("GET = %d, statements %q", code, stmts)
		}
		stmt := stmts[len(stmts)-1]
		// Each placeholder follows the column it binds: an id column takes the id, others the tenant.
		var args []any
		for _, m := range regexp.MustCompile(`\.(\w+) = (\?|\$\d+)`).FindAllStringSubmatch(stmt, -1) {
			if m[1] == "id" || m[1] == "inquiry_id" {
				args = append(args, id)
			} else {
				args = append(args, ten.ID)
			}
		}
		var plan []string
		if pool := a.DB.PgxPool(); pool != nil {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = conn.Exec(context.Background(), `RESET enable_seqscan`) }()
			rows, err := conn.Query(ctx, "EXPLAIN "+stmt, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stmt)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			rows, err := a.DB.QueryContext(ctx, "EXPLAIN QUERY PLAN "+stmt, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stmt)
			}
			defer func() { _ = rows.Close() }()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, line := range plan {
			if strings.Contains(line, "Seq Scan") || strings.HasPrefix(strings.TrimSpace(line), "SCAN ") {
				t.Errorf("the detail statement scans a table:\n%s\n\n%s", strings.Join(plan, "\n"), stmt)
				break
			}
		}
	})
}
