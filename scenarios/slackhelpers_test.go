package scenarios

import (
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/eventstore"
)

// adaIntake is the public intake body the Slack scenarios submit.
const adaIntake = `{"name":"Ada Lovelace","email":"ada@example.com","subject":"Invoice","message":"Charged twice","category":"billing"}`

// slackTenant is what slackTenantWithOperator made through the CLI.
type slackTenant struct {
	AdminToken  string // the tenant's admin token
	Token       string // operator Olga's token (team support)
	PrincipalID string // operator Olga's principal id
}

// slackTenantWithOperator creates tenant acme, operator Olga, and installs the fake Slack with
// the given signing secret.
func slackTenantWithOperator(t *testing.T, dir string, fake *fakeslack.Server, secret string) slackTenant {
	t.Helper()
	var tenant struct {
		AdminToken string `json:"admin_token"`
	}
	cli(t, dir, &tenant, "tenants", "create", "--slug", "acme")
	var op struct {
		Token       string `json:"token"`
		PrincipalID string `json:"principal_id"`
	}
	cli(t, dir, &op, "principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator", "--team", "support")
	var inst map[string]any
	cli(t, dir, &inst, "slack", "install", "--tenant", "acme", "--token", fake.Token(), "--signing-secret", secret,
		"--app-id", "A0FAKEAPP01", "--slack-api-url", fake.URL())
	return slackTenant{AdminToken: tenant.AdminToken, Token: op.Token, PrincipalID: op.PrincipalID}
}

// firstInquiryID returns the id of the first inquiry the query API lists once it has seen every
// write so far.
func firstInquiryID(t *testing.T, srv *server, token string) string {
	t.Helper()
	code, list, err := srv.do("GET", "/v1/inquiries?consistent=true", token, "", "")
	if err != nil || code != 200 {
		t.Fatalf("list = %d %v %v", code, list, err)
	}
	items, _ := list["items"].([]any)
	if len(items) == 0 {
		t.Fatalf("no inquiry listed: %v", list)
	}
	return items[0].(map[string]any)["id"].(string)
}

// rowStatusIs reports whether the List holds exactly one row, whose status cell is want.
func rowStatusIs(fake *fakeslack.Server, listID, statusCol, want string) func() bool {
	return func() bool {
		rs := fake.Rows(listID)
		return len(rs) == 1 && len(rs[0].Strings(statusCol)) == 1 && rs[0].Strings(statusCol)[0] == want
	}
}

// streamsRegistered fails t unless every stream in store's log is of a registered kind
// (eventstore.StreamKinds), so that no package appends to a kind that KurrentDB's subscriptions or
// a tenant's stream list would miss. It returns the kinds it saw.
func streamsRegistered(t *testing.T, store eventstore.Store) map[eventstore.StreamKind]bool {
	t.Helper()
	evs, err := store.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[eventstore.StreamKind]bool{}
	for _, e := range evs {
		k, ok := eventstore.KindOf(e.StreamID)
		if !ok {
			t.Errorf("stream %s (event %s) is of no registered kind", e.StreamID, e.Type)
			continue
		}
		seen[k] = true
	}
	return seen
}

// streamsRegisteredIn opens the embedded storage in dataDir beside a running server.
func streamsRegisteredIn(t *testing.T, dataDir string) map[eventstore.StreamKind]bool {
	t.Helper()
	a, err := app.Open(t.Context(), app.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	return streamsRegistered(t, a.Store)
}
