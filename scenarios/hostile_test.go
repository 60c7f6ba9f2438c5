package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// offSite reports whether a browser following Location loc from base would leave base's host. A
// browser drops tabs and line breaks and reads a backslash as a slash before it resolves the URL.
func offSite(base *url.URL, loc string) bool {
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	u, err := url.Parse(loc)
	return err != nil || base.ResolveReference(u).Host != base.Host
}

// TestConsoleSignInAndMailtoStayOnSite is issue #46's console findings with the real binary: no
// `next` makes the sign-in redirect off-site, however it hides a second slash (a backslash, a dot
// segment that http.Redirect resolves, a tab), and a requester address holding "?cc=" is never
// a mailto link that adds a header: either no link (the console's choice) or a link to that one
// address.
func TestConsoleSignInAndMailtoStayOnSite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acmeAdmin(t, dir) // the tenant; the operator below acts
	var op struct {
		Token string `json:"token"`
	}
	cli(t, dir, &op, "principals", "create", "--tenant", "acme", "--name", "Olga", "--role", "operator")
	srv := start(t, dir, "CASEBOOK_CONSOLE_SIGNIN_RATE=off")
	base, err := url.Parse(srv.base)
	if err != nil {
		t.Fatal(err)
	}
	// noFollow sends one request and returns its answer as is (a client would parse Location first).
	noFollow := roundTrip(http.DefaultTransport.RoundTrip)
	signIn := func(c interface {
		Do(*http.Request) (*http.Response, error)
	}, next string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.base+"/console/signin", strings.NewReader(url.Values{"token": {op.Token}, "next": {next}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res
	}
	for _, next := range []string{
		`/\evil.example`, `//evil.example`, `https://evil.example/`, `/console/../\evil.example`,
		`/inquiries/r/../../\evil.example`, `/console/..\evil.example`, "/console/../\t/evil.example",
		"/\t/evil.example", `/console/%2e%2e/\evil.example`, `/console//evil.example`,
	} {
		res := signIn(noFollow, next)
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc == "" || offSite(base, loc) {
			t.Errorf("sign in with next=%q: %d Location %q", next, res.StatusCode, loc)
		}
	}
	if res := signIn(noFollow, "/console/inbox?status=new"); res.Header.Get("Location") != "/console/inbox?status=new" {
		t.Errorf("a local next is not followed: %q", res.Header.Get("Location"))
	}

	const address = "a?cc=x@evil.example"
	body := fmt.Sprintf(`{"name":"Mal","email":%q,"subject":"mailto","message":"m"}`, address)
	if code, m := srv.call(t, "POST", "/v1/public/acme/inquiries", "", "", "mailto-1", body); code != 202 {
		t.Fatalf("intake = %d %v", code, m)
	}
	id := firstInquiryID(t, srv, op.Token)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Timeout: bounded.Timeout, Jar: jar}
	if res := signIn(browser, "/console/inquiries/"+id); res.StatusCode != http.StatusOK {
		t.Fatalf("sign in to the inquiry = %d", res.StatusCode)
	}
	res, err := browser.Get(srv.base + "/console/inquiries/" + id)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	links := regexp.MustCompile(`href="(mailto:[^"]*)"`).FindAllStringSubmatch(string(page), -1)
	if res.StatusCode != http.StatusOK || len(links) > 1 {
		t.Fatalf("inquiry page = %d with mailto links %q", res.StatusCode, links)
	}
	if len(links) == 0 { // not a plain address: shown as text, with no link at all
		if !strings.Contains(html.UnescapeString(string(page)), address) {
			t.Fatalf("inquiry page shows neither a link nor the address %q", address)
		}
		return
	}
	u, err := url.Parse(html.UnescapeString(links[0][1]))
	if err != nil {
		t.Fatal(err)
	}
	if to, err := url.PathUnescape(u.Opaque); err != nil || u.RawQuery != "" || u.Fragment != "" || to != address {
		t.Fatalf("mailto link %q: to %q, headers %q (%v); want only %q", links[0][1], to, u.RawQuery, err, address)
	}
}

// TestHostileFieldsAndFiles is issue #46's input findings with the real binary: a required field
// holding only a combining mark or a variation selector is refused (422 naming it); PNG bytes named
// .exe are stored and served as .png; text named .html is refused (415).
func TestHostileFieldsAndFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := acmeAdmin(t, dir)
	srv := start(t, dir, "CASEBOOK_INTAKE_RATE_LIMIT=off", "CASEBOOK_INTAKE_TENANT_RATE_LIMIT=off")
	for i, v := range []string{"\u0301", "\ufe0f", " \u0301\u0323 ", "\U000E0100"} {
		body := fmt.Sprintf(`{"email":"m@example.com","subject":%q,"message":"m"}`, v)
		code, m := srv.call(t, "POST", "/v1/public/acme/inquiries", "", "", fmt.Sprint("mark-", i), body)
		if e, _ := m["error"].(map[string]any); code != 422 || e["field"] != "subject" {
			t.Errorf("subject %+q = %d %v", v, code, m)
		}
	}
	if code, m := srv.call(t, "POST", "/v1/public/acme/inquiries", "", "", "ok-1", `{"email":"m@example.com","subject":"Ade\u0301la","message":"m"}`); code != 202 {
		t.Fatalf("a mark on a letter = %d %v", code, m)
	}
	id := firstInquiryID(t, srv, admin)

	upload := func(name string, content []byte) (int, map[string]any) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(content)
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.base+"/v1/inquiries/"+id+"/attachments", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+admin)
		code, m := doJSON(t, req)
		return code, m
	}
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	code, m := upload("invoice.exe", img.Bytes())
	items, _ := m["items"].([]any)
	if code != 201 || len(items) != 1 || items[0].(map[string]any)["name"] != "invoice.png" || items[0].(map[string]any)["content_type"] != "image/png" {
		t.Fatalf("PNG named .exe = %d %v", code, m)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.base+"/v1/inquiries/"+id+"/attachments/"+fmt.Sprint(items[0].(map[string]any)["id"]), nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := bounded.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if cd := res.Header.Get("Content-Disposition"); res.StatusCode != http.StatusOK || !strings.Contains(cd, "attachment") || !strings.Contains(cd, "invoice.png") || strings.Contains(cd, ".exe") {
		t.Fatalf("download = %d, Content-Disposition %q", res.StatusCode, cd)
	}
	if code, m := upload("page.html", []byte("<html><body><script>alert(1)</script></body></html>")); code != 415 {
		t.Fatalf("HTML named .html = %d %v", code, m)
	}
	if code, m := upload("page.html", []byte("just words")); code != 415 || m["error"].(map[string]any)["code"] != "attachment_name" {
		t.Fatalf("text named .html = %d %v", code, m)
	}
}

// roundTrip is a client that follows no redirect.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) Do(req *http.Request) (*http.Response, error) { return f(req) }

// doJSON sends req with the bounded client and decodes a JSON answer.
func doJSON(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	res, err := bounded.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// TestUnknownQueryParametersRefused is issue #46's finding that a misspelt parameter was silently
// ignored, with the real binary: on every API route (reads, writes, admin, public intake, health)
// an unknown query parameter is refused before anything happens, while each route's own
// parameters still work.
func TestUnknownQueryParametersRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := acmeAdmin(t, dir)
	srv := start(t, dir)
	if code, m := srv.call(t, "POST", "/v1/public/acme/inquiries", "", "", "q-1", `{"email":"q@example.com","subject":"s","message":"m"}`); code != 202 {
		t.Fatalf("intake = %d %v", code, m)
	}
	id := firstInquiryID(t, srv, admin)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/inquiries", ""},
		{"GET", "/v1/inquiries/" + id, ""},
		{"GET", "/v1/inquiries/" + id + "/timeline", ""},
		{"GET", "/v1/stats", ""},
		{"GET", "/v1/admin/due-jobs", ""},
		{"GET", "/v1/admin/effects", ""},
		{"GET", "/v1/admin/sla-policy", ""},
		{"GET", "/v1/admin/retention-policy", ""},
		{"GET", "/healthz", ""},
		{"GET", "/readyz", ""},
		{"POST", "/v1/public/acme/inquiries", `{"email":"q@example.com","subject":"bogus","message":"m"}`},
		{"POST", "/v1/inquiries/" + id + "/notes", `{"body":"bogus"}`},
		{"POST", "/v1/inquiries/" + id + "/claim", ""},
		{"PUT", "/v1/admin/sla-policy", slaBomb},
	} {
		code, m := srv.call(t, c.method, c.path+"?bogus=1", admin, "", "bogus-"+c.path, c.body)
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "bogus") {
			t.Errorf("%s %s?bogus=1 = %d %v", c.method, c.path, code, m)
		}
	}
	// Nothing of the refused writes happened.
	if code, d := srv.call(t, "GET", "/v1/inquiries/"+id+"?consistent=true", admin, "", "", ""); code != 200 || fmt.Sprint(d["version"]) != "1" {
		t.Fatalf("detail = %d %v, want version 1", code, d)
	}
	if code, m := srv.call(t, "GET", "/v1/admin/sla-policy", admin, "", "", ""); code != 404 {
		t.Fatalf("sla policy after the refused PUT = %d %v", code, m)
	}
	if code, m := srv.call(t, "GET", "/v1/admin/due-jobs?state=pending&inquiry="+id, admin, "", "", ""); code != 200 {
		t.Fatalf("due jobs with their own parameters = %d %v", code, m)
	}
}
