package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorSaidOnce: a failure is said once, on one line: an unknown tenant is `tenant "x": not
// found`, not wrapped in its own name again; exit 1.
func TestErrorSaidOnce(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if code, _, stderr := runCLI(t, "migrate", "--data-dir", dir); code != 0 {
		t.Fatal(stderr)
	}
	for _, args := range []string{"jobs list --tenant x", "sla show --tenant x", "export --tenant x --email a@example.com", "tokens list --tenant x"} {
		code, stdout, stderr := runCLI(t, append(strings.Fields(args), "--data-dir", dir)...)
		if code != 1 || stdout != "" || stderr != "casebook: tenant \"x\": not found\n" {
			t.Errorf("casebook %s = exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestTenantsCreateExisting: creating a tenant whose slug exists says so (exit 1) and creates
// nothing: no second tenant, no new admin token.
func TestTenantsCreateExisting(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if code, _, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCLI(t, "tenants", "create", "--slug", "acme", "--data-dir", dir)
	if code != 1 || stdout != "" || stderr != "casebook: tenant \"acme\" already exists\n" {
		t.Fatalf("second tenants create = exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stdout, _ = runCLI(t, "tenants", "list", "--data-dir", dir)
	var list struct{ Items []struct{ Slug string } }
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("tenants list = %s (%v); want one tenant", stdout, err)
	}
	_, stdout, _ = runCLI(t, "principals", "list", "--tenant", "acme", "--data-dir", dir)
	if n := strings.Count(stdout, `"role": "admin"`); n != 1 {
		t.Fatalf("acme has %d admins after the refused create:\n%s", n, stdout)
	}
}

// TestUnknownFlagOneLine: an unknown or malformed flag is answered with one line that names it and
// points to the command's -h, not with the whole usage; exit 2.
func TestUnknownFlagOneLine(t *testing.T) {
	t.Parallel()
	for args, cmd := range map[string]string{
		"tenants create --slg acme": "casebook tenants create -h",
		"serve --adr :1":            "casebook serve -h",
		"backup --to":               "casebook backup -h",
		"jobs list --limit many":    "casebook jobs list -h",
		"version --json":            "casebook version -h",
	} {
		code, stdout, stderr := runCLI(t, strings.Fields(args)...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "'"+cmd+"'") || strings.Contains(stderr, "Usage") {
			t.Errorf("casebook %s = exit %d\nstdout: %q\nstderr: %q", args, code, stdout, stderr)
		}
	}
}

// TestServeChecksAddressFirst: a bad or busy --addr (or --metrics-addr) is refused before a data
// directory is created or a database migrated, and said as a JSON log line.
func TestServeChecksAddressFirst(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, args := range [][]string{
		{"--addr", busy.Addr().String()},
		{"--addr", "127.0.0.1:http:x"},
		{"--addr", "127.0.0.1:0", "--metrics-addr", busy.Addr().String()},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		code, stdout, stderr := runCLI(t, append([]string{"serve", "--data-dir", dir}, args...)...)
		var line struct{ Level, Msg, Err string }
		if err := json.Unmarshal([]byte(stderr), &line); code != 1 || stdout != "" || err != nil || line.Level != "ERROR" ||
			!strings.Contains(line.Err, "cannot listen on --") {
			t.Errorf("serve %v = exit %d\nstdout: %q\nstderr: %q", args, code, stdout, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("serve %v created %s (%v)", args, dir, err)
		}
	}
}

// TestSecondServeRefusedEarly: a second serve on the same data directory refuses before it
// prints a console URL or opens the database, with a JSON log line naming the directory.
func TestSecondServeRefusedEarly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	startServe(t, "--data-dir", dir)
	code, stdout, stderr := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "console") ||
		!strings.Contains(stderr, "another casebook serve is running on "+dir) {
		t.Fatalf("second serve = exit %d\nstdout: %q\nstderr: %q", code, stdout, stderr)
	}
}

// TestServeWritesOnlyJSON: serve's stdout stays empty and every line on its stderr is a JSON log
// line, from start to stop (the console URL included), with API and console requests logged with
// their route templates, never their paths.
func TestServeWritesOnlyJSON(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	token := newTenant(t, dir)
	srv := startServe(t, "--data-dir", dir)
	id, err := intake(t.Context(), srv.base, token, "json-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/console/signin", "/console/inquiries/" + id} {
		resp, err := noRedirect.Get(srv.base + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	srv.stop()
	if out := srv.stdout.String(); out != "" {
		t.Errorf("serve wrote to stdout: %q", out)
	}
	routes := map[string]bool{}
	var console bool
	for _, l := range srv.stderrLines() {
		var line struct{ Msg, Route, URL string }
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Errorf("not a JSON line: %q", l)
			continue
		}
		if line.Msg == "http request" {
			routes[line.Route] = true
		}
		console = console || line.Msg == "console" && strings.HasSuffix(line.URL, "/console")
		if strings.Contains(l, id) {
			t.Errorf("a log line holds the inquiry's id: %s", l)
		}
	}
	if !console {
		t.Error("no console URL line")
	}
	for _, want := range []string{"/v1/inquiries", "/console/signin", "/console/inquiries/{id}"} {
		if !routes[want] {
			t.Errorf("no request logged with route %q; routes logged: %v", want, routes)
		}
	}
	if srv.code != 0 {
		t.Errorf("serve stopped with exit %d", srv.code)
	}
}

// noRedirect answers the first response, not the page a redirect leads to.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
