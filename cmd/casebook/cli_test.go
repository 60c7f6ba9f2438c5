package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/tenancy"
)

// commandLines enumerates every command and subcommand the usage text lists.
func commandLines(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	line := regexp.MustCompile(`^  ([a-z][a-z-]*)(?: ([a-z][a-z|-]*))?(?:\s|$)`)
	for _, l := range strings.Split(usage, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if m[2] == "" || leafCommands[m[1]] {
			out = append(out, []string{m[1]})
			continue
		}
		out = append(out, []string{m[1]})
		for _, sub := range strings.Split(m[2], "|") {
			out = append(out, []string{m[1], sub})
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d command lines found in the usage text", len(out))
	}
	return out
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code = exitCode(run(ctx, args, &o, &e), &e)
	return code, o.String(), e.String()
}

// TestHelpExitsZeroEverywhere: -h and --help print usage and exit 0 on every command and
// subcommand the usage text lists.
func TestHelpExitsZeroEverywhere(t *testing.T) {
	t.Parallel()
	for _, cmd := range commandLines(t) {
		for _, h := range []string{"-h", "--help"} {
			args := append(append([]string{}, cmd...), h)
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || !strings.Contains(stdout+stderr, "usage") && !strings.Contains(stdout+stderr, "Usage") {
				t.Errorf("casebook %s = exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
			}
		}
	}
	if code, _, _ := runCLI(t); code != 2 {
		t.Errorf("no command = exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "nope"); code != 2 {
		t.Errorf("unknown command = exit %d, want 2", code)
	}
}

// TestHelpListsOnlyApplicableFlags: a command's help lists the flags it uses, no others.
func TestHelpListsOnlyApplicableFlags(t *testing.T) {
	t.Parallel()
	_, _, tenants := runCLI(t, "tenants", "create", "-h")
	_, _, serve := runCLI(t, "serve", "-h")
	for _, f := range []string{"-lease-ttl", "-intake-", "-metrics-addr", "-addr"} {
		if strings.Contains(tenants, f) {
			t.Errorf("tenants create -h lists %s", f)
		}
	}
	for _, f := range []string{"-slug", "-data-dir", "-v"} {
		if !strings.Contains(tenants, f) {
			t.Errorf("tenants create -h lacks %s", f)
		}
	}
	for _, f := range []string{"-lease-ttl", "-metrics-addr", "-intake-rate-limit"} {
		if !strings.Contains(serve, f) {
			t.Errorf("serve -h lacks %s", f)
		}
	}
	if strings.Contains(serve, "\n  -v\t") {
		t.Error("serve -h lists -v (serve always logs)")
	}
}

// TestMissingRequiredFlagNamed: a missing required flag is named, and nothing is opened.
func TestMissingRequiredFlagNamed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	for args, want := range map[string]string{
		"tenants create":               "--slug",
		"principals create --tenant a": "--name",
		"slack install --tenant a":     "--token",
		"replay":                       "--projection",
		"tokens list":                  "--tenant",
		"tokens create --tenant a":     "--principal",
		"projections retry":            "--stream",
	} {
		code, _, stderr := runCLI(t, append(strings.Fields(args), "--data-dir", dir)...)
		if code != 2 || !strings.Contains(stderr, "missing required flag "+want) {
			t.Errorf("casebook %s = exit %d, stderr %q; want it to name %s", args, code, stderr, want)
		}
	}
	if code, _, stderr := runCLI(t, "migrate", "--data-dir", dir, "extra"); code != 2 || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("positional argument: exit %d, %q", code, stderr)
	}
}

// TestSilentOnSuccess: commands print their result on stdout and log nothing unless -v.
func TestSilentOnSuccess(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	code, stdout, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "admin_token") {
		t.Fatalf("tenants create = exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "migrate", "--data-dir", dir, "-v")
	if code != 0 || !strings.Contains(stderr, `"level"`) {
		t.Fatalf("migrate -v = exit %d, stderr %q: want log lines", code, stderr)
	}
}

// TestVersion: casebook version prints the version, commit and Go version.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCLI(t, "version")
	var v struct{ Version, Commit, Go string }
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil {
		t.Fatalf("version = exit %d, %q: %v", code, stdout, err)
	}
	if v.Version == "" || v.Commit == "" || v.Go != runtime.Version() {
		t.Fatalf("version = %+v", v)
	}
}

// TestBinaryLinksNoTestCode: the production binary links neither the testing package nor any of
// the project's test helpers; the fake Slack it serves (dev fake-slack) included.
func TestBinaryLinksNoTestCode(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !strings.Contains(string(out), "github.com/casebook/casebook/adapters/slack/fakeslack") {
		t.Fatalf("go list -deps found %d packages; the test would pass vacuously", len(deps))
	}
	for _, d := range deps {
		if d == "testing" || strings.HasPrefix(d, "testing/") || d == "net/http/httptest" ||
			strings.HasPrefix(d, "github.com/casebook/") && regexp.MustCompile(`test$|test/`).MatchString(d) {
			t.Errorf("casebook links %s", d)
		}
	}
}

// TestNoEmptyDatabaseLeftBehind: a command that only reads or changes existing data refuses a data
// directory without a database, naming the way to create one, and creates nothing there; migrate
// and tenants create may create it.
func TestNoEmptyDatabaseLeftBehind(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "new")
	for _, args := range []string{"tokens list --tenant a", "principals create --tenant a --name N", "projections list"} {
		code, _, stderr := runCLI(t, append(strings.Fields(args), "--data-dir", dir)...)
		if code == 0 || !strings.Contains(stderr, "no Casebook data in "+dir) || !strings.Contains(stderr, "casebook migrate") {
			t.Errorf("casebook %s on a new directory = exit %d, stderr %q", args, code, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("casebook %s left %s behind (%v)", args, dir, err)
		}
	}
	if code, _, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir); code != 0 {
		t.Fatalf("tenants create on a new directory = exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "tokens", "list", "--tenant", "acme", "--data-dir", dir); code != 0 {
		t.Fatalf("tokens list once the database exists = exit %d, %s", code, stderr)
	}
}

// TestTenantsSetPortal: set-portal replaces the tenant's requester-view setting (a flag left out
// is off) and prints it; an unknown tenant fails.
func TestTenantsSetPortal(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if code, _, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir); code != 0 {
		t.Fatal(stderr)
	}
	for _, c := range []struct {
		args       []string
		prio, team bool
	}{
		{[]string{"--show-priority", "--show-team"}, true, true},
		{[]string{"--show-team"}, false, true},
		{nil, false, false},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"tenants", "set-portal", "--slug", "acme", "--data-dir", dir}, c.args...)...)
		var got struct {
			Slug         string
			ShowPriority bool `json:"show_priority"`
			ShowTeam     bool `json:"show_team"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || got.Slug != "acme" || got.ShowPriority != c.prio || got.ShowTeam != c.team {
			t.Errorf("set-portal %v = exit %d\nstdout: %s\nstderr: %s", c.args, code, stdout, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "tenants", "set-portal", "--slug", "nope", "--data-dir", dir); code == 0 {
		t.Errorf("unknown tenant: exit 0, %s", stderr)
	}
}

// TestTenantCacheTTLFlag: --tenant-cache-ttl (and CASEBOOK_TENANT_CACHE_TTL) sets the public
// routes' tenant cache: a duration keeps it, 0 turns it off (app.Config's negative), the default
// is tenancy.DefaultPublicCacheTTL; a negative or malformed value is refused, naming the flag.
func TestTenantCacheTTLFlag(t *testing.T) {
	parse := func(args ...string) (time.Duration, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		set := tenantCacheFlag(fs)
		if err := fs.Parse(args); err != nil {
			return 0, err
		}
		var cfg app.Config
		err := set(&cfg)
		return cfg.TenantCacheTTL, err
	}
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, tenancy.DefaultPublicCacheTTL},
		{[]string{"--tenant-cache-ttl", "250ms"}, 250 * time.Millisecond},
		{[]string{"--tenant-cache-ttl", "0"}, -1},
	} {
		if got, err := parse(c.args...); err != nil || got != c.want {
			t.Errorf("%v: %v, %v; want %v", c.args, got, err, c.want)
		}
	}
	for _, bad := range []string{"-1s", "soon", "5"} {
		if got, err := parse("--tenant-cache-ttl", bad); err == nil || !strings.Contains(err.Error(), "--tenant-cache-ttl") {
			t.Errorf("%q: %v, %v; want a refusal naming the flag", bad, got, err)
		}
	}
	t.Setenv("CASEBOOK_TENANT_CACHE_TTL", "3s")
	if got, err := parse(); err != nil || got != 3*time.Second {
		t.Errorf("from the environment: %v, %v; want 3s", got, err)
	}
}

// TestServerGC: serve and bench run the collector at serverGCPercent unless GOGC is set.
func TestServerGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	if !setServerGC(func(string) string { return "" }) {
		t.Fatal("setServerGC without GOGC did nothing")
	}
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Fatalf("GC percent without GOGC = %d, want %d", got, serverGCPercent)
	}
	env := func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	}
	if setServerGC(env) {
		t.Fatal("setServerGC overrode GOGC")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent with GOGC set = %d, want it untouched (100)", got)
	}
}
