package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/pgtest"
)

// bounded is the client of the containment scenarios: a server that stopped answering fails the
// test instead of hanging it (a consistent read itself gives up after 5 s with 503).
var bounded = &http.Client{Timeout: 30 * time.Second}

// call sends one JSON request; ifMatch and key are set when not empty.
func (s *server) call(t *testing.T, method, path, token, ifMatch, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", `"`+ifMatch+`"`)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := bounded.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// The policy of the SLA bomb: an hour on weekdays and a year of business time to resolve a `low`
// inquiry, about 35 years of calendar days to walk.
const slaBomb = `{"time_zone":"Europe/Berlin",
 "business_hours":{"mon":["09:00","10:00"],"tue":["09:00","10:00"],"wed":["09:00","10:00"],"thu":["09:00","10:00"],"fri":["09:00","10:00"]},
 "holidays":["2026-12-24","2026-12-25"],
 "targets":{"low":{"first_response":"8760h","resolution":"8760h"}}}`

// slaBeyondBound needs 525,600 weeks of a minute a week: the validator refuses it.
const slaBeyondBound = `{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","09:01"]},
 "targets":{"low":{"resolution":"8760h"}}}`

// TestSLAPolicyBombStopsNoTenant is issue #46's SLA bomb with the real binary on SQLite: tenant A
// sets (with casebook sla set, and again over PUT /v1/admin/sla-policy) a policy of one business
// hour a weekday and a year's resolution target for `low`, and triages an inquiry to `low`. Tenant
// B's intakes, transitions, claims and notes still commit, B's consistent reads answer, /readyz
// says ready, A's inquiry gets its SLA jobs (the schedules subscriber computed its clock, decades
// ahead, in business hours), and all of it holds again after a restart. A policy past the
// calendar's bound (a year of a minute a week) is refused by the CLI and by the route, 422 naming
// `targets`, and leaves the stored policy as it was.
func TestSLAPolicyBombStopsNoTenant(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	slaBombScenario(t, []string{"--data-dir", dir})
}

// TestSLAPolicyBombStopsNoTenantOnPostgres is the same with events and read models on Postgres.
func TestSLAPolicyBombStopsNoTenantOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	slaBombScenario(t, []string{"--database-url", url}, "--lease-ttl", "1s")
}

// slaBombScenario runs the scenario on the storage the flags name; serveFlags are added to serve.
func slaBombScenario(t *testing.T, storage []string, serveFlags ...string) {
	var a, b struct {
		AdminToken string `json:"admin_token"`
	}
	cliWith(t, &a, append([]string{"tenants", "create", "--slug", "tenant-a"}, storage...)...)
	cliWith(t, &b, append([]string{"tenants", "create", "--slug", "tenant-b"}, storage...)...)

	files := t.TempDir()
	bomb, beyond := filepath.Join(files, "bomb.json"), filepath.Join(files, "beyond.json")
	if err := os.WriteFile(bomb, []byte(slaBomb), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(beyond, []byte(slaBeyondBound), 0o600); err != nil {
		t.Fatal(err)
	}
	var set map[string]any
	cliWith(t, &set, append([]string{"sla", "set", "--tenant", "tenant-a", "--file", bomb}, storage...)...)
	// The CLI refuses the policy past the bound with the validator's message.
	cmd := exec.Command(binary, append([]string{"sla", "set", "--tenant", "tenant-a", "--file", beyond}, storage...)...)
	cmd.Env = append(os.Environ(), "CASEBOOK_DATA_DIR=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "at most 100 years") {
		t.Fatalf("sla set past the bound: err %v, output %q", err, out)
	}

	serve := append(append([]string{}, storage...), serveFlags...)
	srv := startWith(t, nil, serve...)
	// Over the route: refused with 422 naming the field; the bomb itself is accepted.
	code, m := srv.call(t, "PUT", "/v1/admin/sla-policy", a.AdminToken, "", "", slaBeyondBound)
	if e, _ := m["error"].(map[string]any); code != 422 || e["field"] != "targets" || !strings.Contains(fmt.Sprint(e["message"]), "at most 100 years") {
		t.Fatalf("PUT past the bound = %d %v", code, m)
	}
	if code, m = srv.call(t, "PUT", "/v1/admin/sla-policy", a.AdminToken, "", "", slaBomb); code != 200 {
		t.Fatalf("PUT the bomb = %d %v", code, m)
	}
	if code, m = srv.call(t, "GET", "/v1/admin/sla-policy", a.AdminToken, "", "", ""); code != 200 || fmt.Sprint(m["targets"]) != "map[low:map[first_response:8760h0m0s resolution:8760h0m0s]]" {
		t.Fatalf("stored policy = %d %v", code, m)
	}

	// Tenant A's inquiry triaged to low: its resolution clock is a year of weekday hours.
	if code, m = srv.call(t, "POST", "/v1/public/tenant-a/inquiries", "", "", "a-1", `{"email":"a@example.com","subject":"s","message":"m"}`); code != 202 {
		t.Fatalf("A's intake = %d %v", code, m)
	}
	aID := firstInquiryID(t, srv, a.AdminToken)
	if code, m = srv.call(t, "POST", "/v1/inquiries/"+aID+"/transitions", a.AdminToken, "1", "", `{"to":"triaged","priority":"low"}`); code != 200 {
		t.Fatalf("A's triage = %d %v", code, m)
	}

	// tenantB works through the API: an intake, a triage, a claim and a note commit, and consistent
	// reads see them. It returns the inquiry's id.
	tenantB := func(srv *server, n int) string {
		t.Helper()
		if code, m := srv.call(t, "POST", "/v1/public/tenant-b/inquiries", "", "", fmt.Sprint("b-", n), fmt.Sprintf(`{"email":"b%d@example.com","subject":"s","message":"m"}`, n)); code != 202 {
			t.Fatalf("B's intake %d = %d %v", n, code, m)
		}
		code, list := srv.call(t, "GET", "/v1/inquiries?consistent=true&status=new", b.AdminToken, "", "", "")
		items, _ := list["items"].([]any)
		if code != 200 || len(items) != 1 {
			t.Fatalf("B's consistent list = %d %v", code, list)
		}
		id := items[0].(map[string]any)["id"].(string)
		if code, m := srv.call(t, "POST", "/v1/inquiries/"+id+"/transitions", b.AdminToken, "1", "", `{"to":"triaged","priority":"low"}`); code != 200 {
			t.Fatalf("B's triage = %d %v", code, m)
		}
		if code, m := srv.call(t, "POST", "/v1/inquiries/"+id+"/claim", b.AdminToken, "", "", ""); code != 200 {
			t.Fatalf("B's claim = %d %v", code, m)
		}
		if code, m := srv.call(t, "POST", "/v1/inquiries/"+id+"/notes", b.AdminToken, "", "", `{"body":"on it"}`); code != 200 {
			t.Fatalf("B's note = %d %v", code, m)
		}
		if code, d := srv.call(t, "GET", "/v1/inquiries/"+id+"?consistent=true", b.AdminToken, "", "", ""); code != 200 || d["status"] != "in_progress" {
			t.Fatalf("B's consistent detail = %d %v", code, d)
		}
		return id
	}
	// healthy waits for /readyz to say ready and for A's resolution jobs, which only the schedules
	// subscriber computing the year-long clock creates.
	healthy := func(srv *server) {
		t.Helper()
		var last string
		eventually(t, "/readyz ready", func() bool {
			code, m := srv.call(t, "GET", "/readyz", "", "", "", "")
			last = fmt.Sprint(code, m)
			return code == 200 && m["status"] == "ready"
		})
		var jobs []any
		eventually(t, "A's SLA jobs", func() bool {
			code, m := srv.call(t, "GET", "/v1/admin/due-jobs?state=pending&inquiry="+aID, a.AdminToken, "", "", "")
			jobs, _ = m["items"].([]any)
			return code == 200 && len(jobs) == 2
		})
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			j := j.(map[string]any)
			due, err := time.Parse(time.RFC3339, fmt.Sprint(j["due_at"]))
			if err != nil {
				t.Fatal(err)
			}
			local := due.In(berlin)
			if j["target"] != "resolution" || local.Year() < 2040 || local.Year() > 2080 || local.Hour() < 9 || local.Hour() > 10 ||
				local.Weekday() == time.Saturday || local.Weekday() == time.Sunday {
				t.Fatalf("A's job %v due %v (last /readyz %s)", j, local, last)
			}
		}
	}
	tenantB(srv, 1)
	healthy(srv)

	// A restart replays the policy and the clock; the server comes back and serves both tenants.
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
	case <-time.After(60 * time.Second):
		t.Fatal("casebook serve did not stop on SIGTERM")
	}
	srv = startWith(t, nil, serve...)
	healthy(srv)
	tenantB(srv, 2)
	if code, m = srv.call(t, "POST", "/v1/inquiries/"+aID+"/notes", a.AdminToken, "", "", `{"body":"still here"}`); code != 200 {
		t.Fatalf("A's note after the restart = %d %v", code, m)
	}
	if code, m = srv.call(t, "GET", "/readyz", "", "", "", ""); code != 200 {
		t.Fatalf("/readyz at the end = %d %v", code, m)
	}
}

// TestDiskFullIntakeAnswers503 is issue #46's full disk with the real binary: the data directory on
// a small tmpfs, an intake once the disk is full answers 503 storage_full with Retry-After (not a
// 500), and once space is freed intakes succeed again and every intake answered 202 is listed. It
// needs to mount a tmpfs (root) and is skipped where that is not permitted.
func TestDiskFullIntakeAnswers503(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	dir := filepath.Join(mnt, "data")
	admin := acmeAdmin(t, dir)
	srv := start(t, dir, "CASEBOOK_INTAKE_RATE_LIMIT=off", "CASEBOOK_INTAKE_TENANT_RATE_LIMIT=off")
	acked := map[string]bool{}
	intake := func(key, message string) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.base+"/v1/public/acme/inquiries",
			strings.NewReader(fmt.Sprintf(`{"email":"d@example.com","subject":"s","message":%q}`, message)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := bounded.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		if res.StatusCode == http.StatusAccepted {
			acked[fmt.Sprint(m["receipt"])] = true
		}
		return res.StatusCode, m, res.Header
	}
	if code, m, _ := intake("before", "m"); code != 202 {
		t.Fatalf("intake before the disk fills = %d %v", code, m)
	}
	// Fill the file system.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(block); err != nil {
			break
		}
	}
	_ = filler.Close()
	// The log may have room left in pages it already holds: intakes of 9,000 characters use it up.
	message := strings.Repeat("full disk ", 900)
	refused := false
	for i := 0; i < 200 && !refused; i++ {
		code, m, h := intake(fmt.Sprint("full-", i), message)
		switch code {
		case http.StatusAccepted:
		case http.StatusServiceUnavailable:
			e, _ := m["error"].(map[string]any)
			if e["code"] != "storage_full" || h.Get("Retry-After") == "" {
				t.Fatalf("intake on a full disk = %d %v, Retry-After %q", code, m, h.Get("Retry-After"))
			}
			refused = true
		default:
			t.Fatalf("intake on a full disk = %d %v, want 503 storage_full", code, m)
		}
	}
	if !refused {
		t.Fatal("200 intakes of 9 KB fit on a full 4 MB disk: the disk never filled")
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	if code, m, _ := intake("after", "m"); code != 202 {
		t.Fatalf("intake once space is back = %d %v", code, m)
	}
	listed := map[string]bool{}
	for cursor := ""; ; {
		path := "/v1/inquiries?limit=100&consistent=true"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, m := srv.call(t, "GET", path, admin, "", "", "")
		if code != 200 {
			t.Fatalf("list = %d %v", code, m)
		}
		for _, it := range m["items"].([]any) {
			listed[fmt.Sprint(it.(map[string]any)["receipt"])] = true
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	for r := range acked {
		if !listed[r] {
			t.Errorf("acknowledged %s is not listed after the disk was freed", r)
		}
	}
}
