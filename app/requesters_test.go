package app_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestRequesterBlindIndex: GET /v1/admin/requesters finds a person's inquiries by their email in
// any case and spacing, in the caller's tenant only (another tenant's admin, with an inquiry from
// the same address, finds only their own), admins only (an operator is 403, a missing or malformed
// address 422), every lookup audited; the export opens every event with its key (message and note)
// and is audited; no table holds the address in clear but the query model's own rows; after one
// erasure that inquiry is no longer found, and after both, no table holds the address at all.
func TestRequesterBlindIndex(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		a, base := serve(t, cfg)
		ctx := t.Context()
		ten, adminP, adminTok, err := a.Tenancy.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		_, opTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
		if err != nil {
			t.Fatal(err)
		}
		other, _, otherTok, err := a.Tenancy.CreateTenant(ctx, "globex")
		if err != nil {
			t.Fatal(err)
		}
		const email = "Grace.Hopper-4471@Example.ORG"
		intake := func(tenant domain.TenantID, key, addr, msg string) domain.InquiryID {
			res, err := a.Commands.Intake(ctx, commands.Intake{Tenant: tenant, Source: domain.SourcePublicForm, IdempotencyKey: key,
				Requester: domain.Requester{Name: "Grace", Email: addr}, Subject: "Compiler", Message: msg, Category: "billing"})
			if err != nil {
				t.Fatal(err)
			}
			return res.InquiryID
		}
		first := intake(ten.ID, "k1", email, "Message-Cobol-1959")
		second := intake(ten.ID, "k2", strings.ToLower(email), "second")
		intake(ten.ID, "k3", "someone.else@example.org", "third")
		theirs := intake(other.ID, "k1", email, "elsewhere")
		if _, err := a.Commands.AddNote(ctx, commands.AddNote{Target: commands.Target{Tenant: ten.ID, InquiryID: first, Actor: adminP},
			Body: "Note-Flowmatic-1955"}); err != nil {
			t.Fatal(err)
		}
		apptest.WaitReady(t, a)

		lookup := func(tok, addr string, want int) []any {
			t.Helper()
			got := call(t, "GET", base+"/v1/admin/requesters?email="+url.QueryEscape(addr), tok, nil, "", want)
			items, _ := got["items"].([]any)
			return items
		}
		for _, addr := range []string{email, strings.ToUpper(email), "  " + strings.ToLower(email) + " "} {
			items := lookup(adminTok, addr, 200)
			if len(items) != 2 || items[0].(map[string]any)["id"] != string(first) || items[1].(map[string]any)["id"] != string(second) {
				t.Fatalf("lookup %q = %v, want %s and %s", addr, items, first, second)
			}
			if it := items[0].(map[string]any); it["receipt"] == "" || it["status"] != "new" || it["created_at"] == "" {
				t.Fatalf("item = %v", it)
			}
		}
		if items := lookup(otherTok, email, 200); len(items) != 1 || items[0].(map[string]any)["id"] != string(theirs) {
			t.Fatalf("the other tenant's lookup = %v, want only its own %s", items, theirs)
		}
		if items := lookup(adminTok, "nobody@example.org", 200); len(items) != 0 {
			t.Fatalf("unknown address = %v", items)
		}
		lookup(opTok, email, 403)
		call(t, "GET", base+"/v1/admin/requesters", adminTok, nil, "", 422)
		lookup(adminTok, "not an address", 422)
		if got := auditOutcomes(t, a, ten.ID, "requester_lookup"); got != "accepted:,accepted:,accepted:,accepted:,refused:forbidden,refused:validation_failed,refused:validation_failed" {
			t.Fatalf("lookup audit = %s", got)
		}

		exp, err := a.ExportRequester(ctx, adminP, "test", strings.ToUpper(email))
		if err != nil {
			t.Fatal(err)
		}
		if len(exp.Inquiries) != 2 || exp.Inquiries[0].Message != "Message-Cobol-1959" || exp.Inquiries[0].Requester.Email != email {
			t.Fatalf("export = %+v", exp)
		}
		if evs := exp.Inquiries[0].Events; len(evs) != 2 || evs[1].Type != "NoteAdded" || !strings.Contains(string(evs[1].Data), "Note-Flowmatic-1955") {
			t.Fatalf("export events = %+v", evs)
		}
		if got := auditOutcomes(t, a, ten.ID, "requester_export"); got != "accepted:" {
			t.Fatalf("export audit = %s", got)
		}
		secrets := []string{email, strings.ToLower(email)}
		assertNoColumnHolds(t, a.DB, secrets, "qm_")

		for i, id := range []domain.InquiryID{first, second} {
			if _, err := a.Commands.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: ten.ID, InquiryID: id, Actor: adminP}}); err != nil {
				t.Fatal(err)
			}
			apptest.WaitReady(t, a)
			if items := lookup(adminTok, email, 200); len(items) != 1-i {
				t.Fatalf("after %d erasures: %v", i+1, items)
			}
		}
		if _, err := a.Commands.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: other.ID, InquiryID: theirs, Actor: domain.Principal{
			ID: "admin", TenantID: other.ID, Role: domain.RoleAdmin}}}); err != nil {
			t.Fatal(err)
		}
		apptest.WaitReady(t, a)
		assertNoColumnHolds(t, a.DB, secrets, "")
	})
}

// assertNoColumnHolds searches every text and binary column of every table (but those whose name
// starts with skip, if given) for each string, on SQLite or Postgres.
func assertNoColumnHolds(t *testing.T, db *sqldb.DB, secrets []string, skip string) {
	t.Helper()
	ctx := t.Context()
	type col struct{ table, name, typ string }
	// Text and binary columns: on SQLite every column whose declared type is not an integer.
	q := `SELECT m.name, p.name, upper(p.type) FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND upper(p.type) NOT LIKE '%INT%'`
	if db.Dialect == sqldb.Postgres {
		q = `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
			JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
			WHERE c.table_schema = current_schema() AND tb.table_type = 'BASE TABLE'
			AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea')`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.table, &c.name, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close() // release the connection before the searches below
	if len(cols) < 10 {
		t.Fatalf("only %d columns found", len(cols))
	}
	for _, c := range cols {
		if skip != "" && strings.HasPrefix(c.table, skip) {
			continue
		}
		var q string
		switch {
		case db.Dialect != sqldb.Postgres:
			q = fmt.Sprintf(`SELECT count(*) FROM %q WHERE instr(CAST(%q AS BLOB), CAST(? AS BLOB)) > 0`, c.table, c.name)
		case c.typ == "bytea":
			q = fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(encode(%q, 'escape'), $1) > 0`, c.table, c.name)
		default:
			q = fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(%q::text, $1) > 0`, c.table, c.name)
		}
		for _, s := range secrets {
			var n int
			if err := db.QueryRowContext(ctx, q, s).Scan(&n); err != nil {
				t.Fatalf("%s.%s: %v", c.table, c.name, err)
			}
			if n > 0 {
				t.Errorf("%s.%s holds %q in %d rows", c.table, c.name, s, n)
			}
		}
	}
}

// TestRetentionPolicyOverHTTP: GET /v1/admin/retention-policy is 404 until a policy is set; PUT
// refuses an operator (403), a malformed document (400) and an invalid policy (422 naming the
// field), stores a valid one in canonical form, which GET returns; every PUT past the admin gate
// is audited (the operator's is refused by the gate of every admin route, like the SLA policy's);
// another tenant does not see it.
func TestRetentionPolicyOverHTTP(t *testing.T) {
	t.Parallel()
	cfg := apptest.Backends[0].Config(t)
	a, base := serve(t, cfg)
	ctx := t.Context()
	ten, _, adminTok, err := a.Tenancy.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, opTok, err := a.Tenancy.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	_, _, otherTok, err := a.Tenancy.CreateTenant(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	path := base + "/v1/admin/retention-policy"
	call(t, "GET", path, adminTok, nil, "", 404)
	good := `{"classes":{"standard":{"archived_for":"90d","closed_for":"36h"}},"default_class":"standard","categories":{"billing":"standard"}}`
	call(t, "PUT", path, opTok, nil, good, 403)
	call(t, "PUT", path, adminTok, nil, `{"classes":`, 400)
	if e := call(t, "PUT", path, adminTok, nil, `{"classes":{"x":{"closed_for":"10m"}}}`, 422); !strings.Contains(fmt.Sprint(e["error"]), "closed_for") {
		t.Fatalf("invalid policy = %v", e)
	}
	stored := call(t, "PUT", path, adminTok, nil, good, 200)
	got := call(t, "GET", path, adminTok, nil, "", 200)
	if fmt.Sprint(got) != fmt.Sprint(stored) || fmt.Sprint(got["default_class"]) != "standard" {
		t.Fatalf("GET = %v, PUT answered %v", got, stored)
	}
	cls := got["classes"].(map[string]any)["standard"].(map[string]any)
	if cls["archived_for"] != "90d" || cls["closed_for"] != "36h0m0s" {
		t.Fatalf("canonical durations = %v", cls)
	}
	call(t, "GET", path, otherTok, nil, "", 404)
	if audit := auditOutcomes(t, a, ten.ID, "retention_policy"); audit != "refused:validation_failed,accepted:" {
		t.Fatalf("audit = %s", audit)
	}
}
