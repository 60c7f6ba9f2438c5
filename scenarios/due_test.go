package scenarios

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/sqldb"
)

// count runs a count query on the data directory's database (WAL: readers beside a server).
func count(t *testing.T, db *sqldb.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKill9WithClaimedDueJobs schedules 300 follow-ups through the API, kills casebook serve with
// SIGKILL while it holds claims on some of them, and restarts it: the claimed jobs return to the
// queue when their claim expires, and every follow-up fires exactly once.
func TestKill9WithClaimedDueJobs(t *testing.T) {
	dataDir := t.TempDir()
	var tenant struct {
		AdminToken string `json:"admin_token"`
	}
	cli(t, dataDir, &tenant, "tenants", "create", "--slug", "acme")
	var op struct {
		Token string `json:"token"`
	}
	cli(t, dataDir, &op, "principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator")
	env := []string{"CASEBOOK_INTAKE_RATE_LIMIT=off", "CASEBOOK_INTAKE_TENANT_RATE_LIMIT=off", "CASEBOOK_DUE_TICK=50ms", "CASEBOOK_DUE_CLAIM_TTL=3s"}
	srv := start(t, dataDir, env...)
	const inquiries, perInquiry = 30, 10
	var ids []string
	for i := range inquiries {
		code, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", fmt.Sprint("k", i), fmt.Sprintf(`{"email":"u%d@example.com","subject":"s","message":"m"}`, i))
		if err != nil || code != 202 {
			t.Fatalf("intake: %d %v", code, err)
		}
	}
	code, list, err := srv.do("GET", "/v1/inquiries?limit=100&consistent=true", op.Token, "", "")
	if err != nil || code != 200 {
		t.Fatalf("list: %d %v", code, err)
	}
	for _, it := range list["items"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	if len(ids) != inquiries {
		t.Fatalf("%d inquiries listed", len(ids))
	}
	// Each follow-up is due just past the shortest delay the domain allows (a minute) after its
	// own request (relative, so a slow machine never asks for a time already past).
	for _, id := range ids {
		for k := range perInquiry {
			code, m, err := srv.do("POST", "/v1/inquiries/"+id+"/follow-ups", op.Token, fmt.Sprint("fu-", k), `{"in":"61s"}`)
			if err != nil || code != 201 {
				t.Fatalf("follow-up: %d %v %v", code, m, err)
			}
		}
	}
	db, err := sqldb.OpenSQLite(filepath.Join(dataDir, app.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const total = inquiries * perInquiry
	// Kill the server the moment it holds claims.
	deadline := time.Now().Add(150 * time.Second)
	for count(t, db, `SELECT count(*) FROM due_jobs WHERE state = 'claimed'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server never held a claim")
		}
		time.Sleep(2 * time.Millisecond) // polling the real state; the claim is what we wait for
	}
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	claimed := count(t, db, `SELECT count(*) FROM due_jobs WHERE state = 'claimed'`)
	doneBefore := count(t, db, `SELECT count(*) FROM due_jobs WHERE state = 'done'`)
	if claimed == 0 || doneBefore == total {
		t.Fatalf("after the kill: %d claimed, %d done; the kill missed the claims", claimed, doneBefore)
	}
	t.Logf("killed holding %d claims; %d of %d jobs done", claimed, doneBefore, total)

	start(t, dataDir, env...)
	deadline = time.Now().Add(90 * time.Second)
	for count(t, db, `SELECT count(*) FROM due_jobs WHERE state = 'done'`) < total {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs done after the restart", count(t, db, `SELECT count(*) FROM due_jobs WHERE state = 'done'`), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(t, db, `SELECT count(*) FROM due_jobs WHERE expired_claims > 0`); n < claimed {
		t.Fatalf("%d jobs show an expired claim, but %d were claimed at the kill", n, claimed)
	}
	if n := count(t, db, `SELECT count(*) FROM due_jobs WHERE outcome = 'fired'`) +
		count(t, db, `SELECT count(*) FROM due_jobs WHERE outcome = 'moved_on'`); n != total {
		t.Fatalf("%d jobs ran to an outcome, want %d", n, total)
	}
	// Exactly one FollowUpDue per follow-up in the log.
	events := count(t, db, `SELECT count(*) FROM events WHERE type = 'FollowUpDue'`)
	if events != total {
		t.Fatalf("%d FollowUpDue events for %d follow-ups", events, total)
	}
}
