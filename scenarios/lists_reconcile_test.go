package scenarios

import (
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/app/apptest"
)

// TestListReconcileCLI: the real binary with the fake Slack. Inquiries opened before a List is
// activated get rows from `casebook lists reconcile` (the activation backfill), which prints its
// outcome counts as JSON; a dry run after it finds every row in sync and writes nothing; GET
// /v1/admin/lists shows the watermarks and the last run to the tenant's admin only; the inquiry
// detail's slack block shows the List row synced next to the thread.
func TestListReconcileCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Clock: fakeslack.SystemClock(), ItemsPageMax: 2})
	li, err := fake.CreateList("Inquiries", apptest.BoardColumns()...)
	if err != nil {
		t.Fatal(err)
	}
	ten := slackTenantWithOperator(t, dir, fake, "s")
	var other struct {
		AdminToken string `json:"admin_token"`
	}
	cli(t, dir, &other, "tenants", "create", "--slug", "globex")
	srv := start(t, dir)
	for i := range 3 {
		if code, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", fmt.Sprintf("form-%d", i), adaIntake); err != nil || code != 202 {
			t.Fatalf("intake = %d %v", code, err)
		}
	}
	id := firstInquiryID(t, srv, ten.Token) // the query model has all three
	// So has the List intents subscriber (its batch window may be longer than the query model's):
	// inquiries it applies after the activation below get their rows from the server instead.
	waitApplied(t, dir, "listintents")
	var cfg map[string]any
	cli(t, dir, &cfg, "lists", "activate", "--tenant", "acme", "--list", li.ID, "--clearance", "internal")

	type report struct {
		Complete bool           `json:"complete"`
		DryRun   bool           `json:"dry_run"`
		Outcomes map[string]int `json:"outcomes"`
		Actions  map[string]int `json:"actions"`
		Planned  map[string]int `json:"planned"`
		Coverage struct {
			ActivePages int `json:"active_pages"`
		} `json:"coverage"`
	}
	var rep report
	cli(t, dir, &rep, "lists", "reconcile", "--tenant", "acme", "--list", li.ID, "--read-every", "0")
	if !rep.Complete || rep.Outcomes["confirmed_missing"] != 3 || rep.Actions["create"] != 3 || len(fake.Rows(li.ID)) != 3 {
		t.Fatalf("reconcile = %+v, %d rows", rep, len(fake.Rows(li.ID)))
	}
	writes := fake.CallCount("slackLists.items.create") + fake.CallCount("slackLists.items.update") + fake.CallCount("slackLists.items.delete")
	var dry report
	cli(t, dir, &dry, "lists", "reconcile", "--tenant", "acme", "--list", li.ID, "--read-every", "0", "--dry-run")
	if !dry.DryRun || dry.Outcomes["in_sync"] != 3 || len(dry.Planned) != 0 || dry.Coverage.ActivePages != 2 {
		t.Fatalf("dry run = %+v", dry)
	}
	if w := fake.CallCount("slackLists.items.create") + fake.CallCount("slackLists.items.update") + fake.CallCount("slackLists.items.delete"); w != writes {
		t.Fatalf("the dry run wrote %d times", w-writes)
	}

	code, body, err := srv.do("GET", "/v1/admin/lists", ten.AdminToken, "", "")
	if err != nil || code != 200 {
		t.Fatalf("GET /v1/admin/lists = %d %v %v", code, body, err)
	}
	items, _ := body["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("admin lists = %v", body)
	}
	rc, _ := items[0].(map[string]any)["reconcile"].(map[string]any)
	marks, _ := rc["watermarks"].(map[string]any)
	last, _ := rc["last_run"].(map[string]any)
	outcomes, _ := last["outcomes"].(map[string]any)
	if marks["last_fully_applied"] == nil || marks["last_successfully_observed"] == nil || outcomes["confirmed_missing"] != float64(3) {
		t.Fatalf("reconcile block = %v", rc)
	}
	if code, body, _ := srv.do("GET", "/v1/admin/lists", other.AdminToken, "", ""); code != 200 || len(body["items"].([]any)) != 0 {
		t.Fatalf("another tenant's admin sees %d %v", code, body)
	}
	if code, _, _ := srv.do("GET", "/v1/admin/lists", ten.Token, "", ""); code != 403 {
		t.Fatalf("an operator reads the admin Lists view: %d", code)
	}

	code, detail, err := srv.do("GET", "/v1/inquiries/"+id, ten.Token, "", "")
	if err != nil || code != 200 {
		t.Fatalf("detail = %d %v", code, err)
	}
	slack, _ := detail["slack"].(map[string]any)
	rows, _ := slack["lists"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["state"] != "synced" || rows[0].(map[string]any)["row_id"] == "" || slack["state"] == nil {
		t.Fatalf("slack block = %v", slack)
	}
}

// waitApplied polls (bounded) until the subscriber named name has applied the whole log, as
// `casebook projections list` reads its checkpoint.
func waitApplied(t *testing.T, dir, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out []struct {
			Name      string `json:"name"`
			LagEvents int64  `json:"lag_events"`
		}
		cli(t, dir, &out, "projections", "list")
		for _, d := range out {
			if d.Name == name && d.LagEvents == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has not applied the log: %+v", name, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
