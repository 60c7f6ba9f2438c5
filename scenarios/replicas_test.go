package scenarios

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/casebook/casebook/internal/pgtest"
)

// TestTwoReplicasOnePostgres runs two casebook serve processes on one database: intakes go through
// both, one is killed with SIGKILL, the survivor takes over its subscribers once the lease expires,
// and every acknowledged inquiry appears exactly once in the query model.
func TestTwoReplicasOnePostgres(t *testing.T) {
	url := pgtest.URL(t)
	var tenant struct {
		AdminToken string `json:"admin_token"`
	}
	cliWith(t, &tenant, "tenants", "create", "--slug", "acme", "--database-url", url)
	storage := []string{"--database-url", url, "--lease-ttl", "1s"}
	noLimits := []string{"CASEBOOK_INTAKE_RATE_LIMIT=off", "CASEBOOK_INTAKE_TENANT_RATE_LIMIT=off"} // one loopback client
	a, b := startWith(t, noLimits, storage...), startWith(t, noLimits, storage...)

	var mu sync.Mutex
	acked := map[string]bool{}
	submit := func(s *server, prefix string, n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				body := fmt.Sprintf(`{"email":"%s%d@example.com","subject":"s","message":"m"}`, prefix, i)
				code, m, err := s.do("POST", "/v1/public/acme/inquiries", "", fmt.Sprint(prefix, i), body)
				if err != nil || code != http.StatusAccepted {
					t.Errorf("intake %s%d: %d %v %v", prefix, i, code, m, err)
					return
				}
				mu.Lock()
				acked[m["receipt"].(string)] = true
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	submit(a, "a", 40)
	submit(b, "b", 40)
	// Both replicas serve consistent reads, whichever owns the query model.
	for _, s := range []*server{a, b} {
		if code, m, err := s.do("GET", "/v1/inquiries?limit=1&consistent=true", tenant.AdminToken, "", ""); err != nil || code != 200 {
			t.Fatalf("consistent read: %d %v %v", code, m, err)
		}
	}
	// Kill the replica that owns the query model, so the survivor must take it over.
	owner, survivor := a, b
	if owns(t, b, tenant.AdminToken) {
		owner, survivor = b, a
	}
	if !owns(t, owner, tenant.AdminToken) || owns(t, survivor, tenant.AdminToken) {
		t.Fatal("want exactly one owner of the query model")
	}
	if err := owner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-owner.done
	b = survivor
	submit(b, "c", 40)

	seen := map[string]int{}
	cursor := ""
	for {
		path := "/v1/inquiries?limit=100&consistent=true"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, m, err := b.do("GET", path, tenant.AdminToken, "", "")
		if err != nil || code != 200 {
			t.Fatalf("list on the survivor: %d %v %v", code, m, err)
		}
		for _, it := range m["items"].([]any) {
			seen[it.(map[string]any)["receipt"].(string)]++
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) != 120 {
		t.Fatalf("acknowledged %d intakes, want 120", len(acked))
	}
	for r := range acked {
		if seen[r] != 1 {
			t.Errorf("receipt %s listed %d times, want once", r, seen[r])
		}
	}
	if len(seen) != len(acked) {
		t.Errorf("listed %d inquiries, acknowledged %d", len(seen), len(acked))
	}
	if !owns(t, b, tenant.AdminToken) {
		t.Error("the survivor does not own the query model")
	}
}

// owns asks a replica whether it holds the query model's lease.
func owns(t *testing.T, s *server, token string) bool {
	t.Helper()
	code, m, err := s.do("GET", "/v1/admin/projections", token, "", "")
	if err != nil || code != 200 {
		t.Fatalf("admin projections: %d %v %v", code, m, err)
	}
	for _, it := range m["items"].([]any) {
		st := it.(map[string]any)
		if st["name"] == "querymodel" {
			return st["owner"] == true
		}
	}
	t.Fatal("no querymodel status")
	return false
}
