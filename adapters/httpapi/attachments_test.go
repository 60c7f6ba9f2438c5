package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
)

type upload struct{ name, content string }

// attach posts files as multipart/form-data parts named "file".
func (tb *testBundle) attach(t *testing.T, token, id string, files ...upload) resp {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range files {
		w, err := mw.CreateFormFile("file", f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.content))
	}
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, tb.srv.URL+"/v1/inquiries/"+id+"/attachments", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// attachments lists an inquiry's attachments from its detail.
func (tb *testBundle) attachments(t *testing.T, id string) []any {
	t.Helper()
	d := tb.do(t, "GET", "/v1/inquiries/"+id+"?consistent=true", tb.op, nil, "")
	list, ok := d.body["attachments"].([]any)
	if d.status != 200 || !ok {
		t.Fatalf("detail = %d %s", d.status, d.raw)
	}
	return list
}

func text(n int) string { return strings.Repeat("a", n) }

// TestAttachmentLimits: a file over the size limit is 413, a type outside the allow-list (sniffed,
// whatever the name says) 415, too many files 422, a full tenant 413 — each with nothing stored;
// accepted files are listed in the detail with normalized names and download as attachments.
func TestAttachmentLimits(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Attachments = commands.AttachmentLimits{MaxFileBytes: 1000, MaxFiles: 2, MaxTenantBytes: 2400}
	})
	_, id := tb.submit(t, "a-1")
	_, id2 := tb.submit(t, "a-2")
	refusals := []struct {
		name   string
		files  []upload
		status int
	}{
		{"over the file limit", []upload{{"big.txt", text(1001)}}, http.StatusRequestEntityTooLarge},
		{"one good, one too large", []upload{{"ok.txt", text(10)}, {"big.txt", text(5000)}}, http.StatusRequestEntityTooLarge},
		{"HTML", []upload{{"invoice.txt", "<!DOCTYPE html><html><script>alert(1)</script></html>"}}, http.StatusUnsupportedMediaType},
		{"executable", []upload{{"invoice.pdf", "MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00"}}, http.StatusUnsupportedMediaType},
		{"three files", []upload{{"1.txt", "one"}, {"2.txt", "two"}, {"3.txt", "three"}}, http.StatusUnprocessableEntity},
		{"empty file", []upload{{"e.txt", ""}}, http.StatusUnprocessableEntity},
		{"no file", nil, http.StatusUnprocessableEntity},
	}
	for _, c := range refusals {
		if r := tb.attach(t, tb.op, id, c.files...); r.status != c.status {
			t.Errorf("%s = %d %s, want %d", c.name, r.status, r.raw, c.status)
		}
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/attachments", tb.op, nil, `{"file":"x"}`); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("JSON body = %d", r.status)
	}
	if got := tb.attachments(t, id); len(got) != 0 {
		t.Fatalf("refused uploads stored %v", got)
	}
	r := tb.attach(t, tb.op, id, upload{`..\..\etc/pa:ss"wd .txt`, text(400)}, upload{"  .hidden\u202enotes.txt", "Invoice 42, line 3."})
	if r.status != http.StatusCreated {
		t.Fatalf("two files = %d %s", r.status, r.raw)
	}
	list := tb.attachments(t, id)
	if len(list) != 2 {
		t.Fatalf("listed %v", list)
	}
	first := list[0].(map[string]any)
	names := []string{first["name"].(string), list[1].(map[string]any)["name"].(string)}
	if names[0] != "pa_ss_wd .txt" || names[1] != "hiddennotes.txt" || first["content_type"] != "text/plain; charset=utf-8" || first["size"] != float64(400) {
		t.Fatalf("stored %v", list)
	}
	if r := tb.attach(t, tb.op, id, upload{"third.txt", "x"}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a third attachment on the inquiry = %d %s", r.status, r.raw)
	}
	// The tenant holds 400+19 bytes; 2 × 1000 more would pass 2400.
	if r := tb.attach(t, tb.op, id2, upload{"a.txt", text(1000)}, upload{"b.txt", text(1000)}); r.status != http.StatusRequestEntityTooLarge || r.body["error"].(map[string]any)["code"] != "attachment_quota" {
		t.Fatalf("over the tenant's quota = %d %s", r.status, r.raw)
	}
	if got := tb.attachments(t, id2); len(got) != 0 {
		t.Fatalf("a refused upload stored %v", got)
	}
	// Download: the bytes, as an attachment, never sniffed, sandboxed.
	res, err := http.NewRequest(http.MethodGet, tb.srv.URL+"/v1/inquiries/"+id+"/attachments/"+first["id"].(string), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Set("Authorization", "Bearer "+tb.viewer)
	got, err := http.DefaultClient.Do(res)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(got.Body)
	_ = got.Body.Close()
	h := got.Header
	if got.StatusCode != http.StatusOK || string(data) != text(400) || h.Get("Content-Disposition") != `attachment; filename="pa_ss_wd .txt"` ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("download = %d %v %q", got.StatusCode, h, data)
	}
	if r := tb.do(t, "GET", "/v1/inquiries/"+id+"/attachments/"+first["id"].(string), tb.other, nil, ""); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's download = %d", r.status)
	}
	if r := tb.attach(t, tb.other, id, upload{"x.txt", "x"}); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's upload = %d %s", r.status, r.raw)
	}
	if r := tb.attach(t, tb.viewer, id2, upload{"x.txt", "x"}); r.status != http.StatusForbidden {
		t.Fatalf("a viewer's upload = %d %s", r.status, r.raw)
	}
}

// TestPortalAttachesToOwnSubmission: the submitting integration may attach to its inquiry, not to
// any other (404), and cannot download (attachments are read by operators).
func TestPortalAttachesToOwnSubmission(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	r := tb.portalSubmit(t, integ, "att-1", portalBody)
	if r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	own := r.body["id"].(string)
	_, other := tb.submit(t, "att-2")
	if r := tb.attach(t, integ, own, upload{"receipt.txt", "Paid on 3 March."}); r.status != http.StatusCreated {
		t.Fatalf("own inquiry = %d %s", r.status, r.raw)
	}
	if r := tb.attach(t, integ, other, upload{"receipt.txt", "Paid on 3 March."}); r.status != http.StatusNotFound {
		t.Fatalf("another's inquiry = %d %s", r.status, r.raw)
	}
	if got := tb.attachments(t, other); len(got) != 0 {
		t.Fatalf("stored on another's inquiry: %v", got)
	}
	att := tb.attachments(t, own)[0].(map[string]any)["id"].(string)
	if r := tb.do(t, "GET", "/v1/inquiries/"+own+"/attachments/"+att, integ, nil, ""); r.status != http.StatusForbidden {
		t.Fatalf("integration download = %d", r.status)
	}
}

// TestAttachmentHTMLCannotRunInBrowser: a file full of markup that sniffs as plain text (so it is
// accepted) is served so that Chromium, opening its URL with an operator's token, neither renders
// it as HTML nor runs its script: the script's beacon is never requested.
func TestAttachmentHTMLCannotRunInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	tb := setup(t)
	var hits atomic.Int32 // requests the attachment's markup would make (not the browser's favicon)
	beacon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/img" || r.URL.Path == "/script" {
			hits.Add(1)
		}
	}))
	t.Cleanup(beacon.Close)
	_, id := tb.submit(t, "html-1")
	page := "Notes from the call\n<html><body><img src=\"" + beacon.URL + "/img\"><script>fetch('" + beacon.URL + "/script');document.title='ran'</script></body></html>"
	r := tb.attach(t, tb.op, id, upload{"page.txt", page}) // page.html is refused (TestAttachmentFileName)
	if r.status != http.StatusCreated {
		t.Fatalf("upload = %d %s", r.status, r.raw)
	}
	att := r.body["items"].([]any)[0].(map[string]any)
	if att["content_type"] != "text/plain; charset=utf-8" {
		t.Fatalf("sniffed as %v", att["content_type"])
	}
	url := tb.srv.URL + "/v1/inquiries/" + id + "/attachments/" + att["id"].(string)
	// The tab opens the download with the operator's token (network is enabled on every tab).
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + tb.op}}); err != nil {
		t.Fatal(err)
	}
	_ = chromedp.Do(ctx, chromedp.Navigate(url)) // a download aborts the navigation
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	contentType, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.contentType`))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	// Either the download left the tab where it was, or the tab shows the file as plain text.
	if title == "ran" || (loc == url && contentType == "text/html") {
		t.Fatalf("the attachment ran as a page: at %q, title %q, content type %q", loc, title, contentType)
	}
	// A page of the beacon's origin loads after anything the attachment could have requested.
	if err := chromedp.Do(ctx, chromedp.Navigate(beacon.URL+"/after")); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the attachment's markup requested the beacon %d times", n)
	}
}

// portalMultipart posts a portal intake as multipart/form-data: the "inquiry" part (skipped when
// empty) and file parts.
func (tb *testBundle) portalMultipart(t *testing.T, token, key, inquiry string, files ...upload) resp {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if inquiry != "" {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="inquiry"`}
		h["Content-Type"] = []string{"application/json"}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(inquiry))
	}
	for _, f := range files {
		w, err := mw.CreateFormFile("file", f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.content))
	}
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, tb.srv.URL+"/v1/inquiries", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// TestPortalIntakeWithAttachments: a portal intake as multipart/form-data carries its files. Every
// refusal (a file over the limit 413, a sniffed type outside the allow-list 415, too many files or
// an empty one 422, the tenant's quota 413, an invalid intake 422, an inquiry part over the body
// limit 413, a malformed body 400) comes
// before anything is appended: no inquiry, no file, and the key still free, so the same key then
// succeeds. The key covers the files: the same body again is the first answer with the same
// attachments and nothing stored twice; other files, or none, under that key are 422. The
// requester's view lists the files the portal sent, never an operator's.
func TestPortalIntakeWithAttachments(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) {
		c.Public = unlimited
		c.Attachments = commands.AttachmentLimits{MaxFileBytes: 1000, MaxFiles: 2, MaxTenantBytes: 2500}
	})
	integ := tb.integration(t, "acme", "Portal")
	_, other := tb.submit(t, "fill")
	if r := tb.attach(t, tb.op, other, upload{"fill.txt", text(1000)}); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	invalid := strings.Replace(portalBody, `"subject":"Invoice is wrong"`, `"subject":""`, 1)
	refusals := []struct {
		name    string
		inquiry string
		files   []upload
		status  int
	}{
		{"a file over the limit", portalBody, []upload{{"ok.txt", text(10)}, {"big.txt", text(1001)}}, http.StatusRequestEntityTooLarge},
		{"HTML", portalBody, []upload{{"invoice.txt", "<!DOCTYPE html><html><script>alert(1)</script></html>"}}, http.StatusUnsupportedMediaType},
		{"three files", portalBody, []upload{{"1.txt", "one"}, {"2.txt", "two"}, {"3.txt", "three"}}, http.StatusUnprocessableEntity},
		{"an empty file", portalBody, []upload{{"e.txt", ""}}, http.StatusUnprocessableEntity},
		{"the tenant's quota", portalBody, []upload{{"a.txt", text(800)}, {"b.txt", text(800)}}, http.StatusRequestEntityTooLarge},
		{"an invalid intake", invalid, []upload{{"a.txt", text(10)}}, http.StatusUnprocessableEntity},
		{"no inquiry part", "", []upload{{"a.txt", text(10)}}, http.StatusBadRequest},
		{"an unknown field", `{"subject":"x","secret":1}`, []upload{{"a.txt", text(10)}}, http.StatusBadRequest},
		{"an inquiry part over the body limit", strings.Replace(portalBody, "Invoice 42 charges me twice.", text(int(httpapi.MaxPublicBody)), 1), []upload{{"a.txt", text(10)}}, http.StatusRequestEntityTooLarge},
	}
	for _, c := range refusals {
		if r := tb.portalMultipart(t, integ, "m-1", c.inquiry, c.files...); r.status != c.status {
			t.Errorf("%s = %d %s, want %d", c.name, r.status, r.raw, c.status)
		}
	}
	if l := tb.do(t, "GET", "/v1/portal/inquiries?external_id=cust-42", integ, nil, ""); l.status != 200 || len(l.body["items"].([]any)) != 0 {
		t.Fatalf("refused intakes recorded %s", l.raw)
	}
	if l := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.op, nil, ""); len(l.body["items"].([]any)) != 1 {
		t.Fatalf("refused intakes appended: %s", l.raw)
	}

	files := []upload{{"receipt.txt", "Invoice 42, charged twice."}, {"../scan.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"}}
	first := tb.portalMultipart(t, integ, "m-1", portalBody, files...)
	if first.status != http.StatusCreated {
		t.Fatalf("intake with files = %d %s", first.status, first.raw)
	}
	id := first.body["id"].(string)
	atts, _ := first.body["attachments"].([]any)
	if len(atts) != 2 || atts[0].(map[string]any)["name"] != "receipt.txt" || atts[1].(map[string]any)["name"] != "scan.png" || atts[1].(map[string]any)["content_type"] != "image/png" {
		t.Fatalf("intake answer = %s", first.raw)
	}
	if got := tb.attachments(t, id); len(got) != 2 {
		t.Fatalf("detail lists %v", got)
	}
	again := tb.portalMultipart(t, integ, "m-1", portalBody, files...)
	if again.status != http.StatusCreated || again.body["id"] != id || again.body["receipt"] != first.body["receipt"] ||
		again.body["attachments"].([]any)[0].(map[string]any)["id"] != atts[0].(map[string]any)["id"] {
		t.Fatalf("replay = %d %s, first %s", again.status, again.raw, first.raw)
	}
	if got := tb.attachments(t, id); len(got) != 2 {
		t.Fatalf("after the replay the detail lists %v", got)
	}
	if r := tb.portalMultipart(t, integ, "m-1", portalBody, upload{"receipt.txt", "Invoice 43."}, files[1]); r.status != http.StatusUnprocessableEntity {
		t.Errorf("same key, another file = %d %s", r.status, r.raw)
	}
	if r := tb.portalSubmit(t, integ, "m-1", portalBody); r.status != http.StatusUnprocessableEntity {
		t.Errorf("same key, no files = %d %s", r.status, r.raw)
	}
	// Download as the operator: the bytes the portal sent.
	req, err := http.NewRequest(http.MethodGet, tb.srv.URL+"/v1/inquiries/"+id+"/attachments/"+atts[0].(map[string]any)["id"].(string), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tb.op)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || string(data) != files[0].content {
		t.Fatalf("download = %d %q", res.StatusCode, data)
	}
	// The requester's view lists the files the portal sent, without ids.
	view := tb.do(t, "GET", "/v1/portal/inquiries/"+first.body["receipt"].(string), integ, nil, "")
	sent, _ := view.body["attachments"].([]any)
	if view.status != 200 || len(sent) != 2 || sent[0].(map[string]any)["name"] != "receipt.txt" || sent[0].(map[string]any)["id"] != nil {
		t.Fatalf("requester view = %d %s", view.status, view.raw)
	}
	// A JSON intake answers as before, without an attachments member; its view lists what the
	// portal attached later, never what an operator attached.
	j := tb.portalSubmit(t, integ, "j-1", portalBody)
	if j.status != http.StatusCreated || j.body["attachments"] != nil {
		t.Fatalf("JSON intake = %d %s", j.status, j.raw)
	}
	if r := tb.attach(t, tb.op, j.body["id"].(string), upload{"internal-memo.txt", "memo"}); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	if r := tb.attach(t, integ, j.body["id"].(string), upload{"later.txt", "later"}); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	view = tb.do(t, "GET", "/v1/portal/inquiries/"+j.body["receipt"].(string), integ, nil, "")
	if sent, _ := view.body["attachments"].([]any); len(sent) != 1 || sent[0].(map[string]any)["name"] != "later.txt" || strings.Contains(view.raw, "internal-memo") {
		t.Fatalf("requester view after an operator's attachment = %s", view.raw)
	}
}

// TestPortalIntakeWithAttachmentsConcurrentReplays: the same multipart intake sent four times at
// once under one key makes one inquiry with its files stored once, and every answer is 201 with
// the same inquiry and attachment ids.
func TestPortalIntakeWithAttachmentsConcurrentReplays(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) { c.Uploads.ConcurrentPerPrincipal = 4 })
	integ := tb.integration(t, "acme", "Portal")
	files := []upload{{"a.txt", "first file"}, {"b.txt", "second file"}}
	answers := make([]resp, 4)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = tb.portalMultipart(t, integ, "c-1", portalBody, files...) })
	}
	wg.Wait()
	for _, a := range answers {
		atts, _ := a.body["attachments"].([]any)
		if a.status != http.StatusCreated || a.body["id"] != answers[0].body["id"] || len(atts) != 2 ||
			atts[0].(map[string]any)["id"] != answers[0].body["attachments"].([]any)[0].(map[string]any)["id"] {
			t.Fatalf("answers = %+v", answers)
		}
	}
	if got := tb.attachments(t, answers[0].body["id"].(string)); len(got) != 2 {
		t.Fatalf("stored %v", got)
	}
	if l := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.op, nil, ""); len(l.body["items"].([]any)) != 1 {
		t.Fatalf("inquiries = %s", l.raw)
	}
}

// TestAttachmentRefusedOnArchivedInquiry: an archived inquiry refuses operator writes from every
// path, attachments included: an operator's upload and its submitting portal's are 409 archived,
// and nothing is stored; after unarchive the upload is accepted again.
func TestAttachmentRefusedOnArchivedInquiry(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	integ := tb.integration(t, "acme", "Portal")
	r := tb.portalSubmit(t, integ, "arch-1", portalBody)
	if r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	id := r.body["id"].(string)
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/archive", tb.admin, map[string]string{"If-Match": `"1"`}, `{"reason":"done"}`); r.status != http.StatusOK {
		t.Fatalf("archive = %d %s", r.status, r.raw)
	}
	for _, token := range []string{tb.op, integ} {
		if r := tb.attach(t, token, id, upload{"receipt.txt", "Paid on 3 March."}); r.status != http.StatusConflict || r.code() != "archived" {
			t.Fatalf("upload to an archived inquiry = %d %s", r.status, r.raw)
		}
	}
	if got := tb.attachments(t, id); len(got) != 0 {
		t.Fatalf("stored on an archived inquiry: %v", got)
	}
	if r := tb.do(t, "POST", "/v1/inquiries/"+id+"/unarchive", tb.admin, map[string]string{"If-Match": `"2"`}, ""); r.status != http.StatusOK {
		t.Fatalf("unarchive = %d %s", r.status, r.raw)
	}
	if r := tb.attach(t, tb.op, id, upload{"receipt.txt", "Paid on 3 March."}); r.status != http.StatusCreated {
		t.Fatalf("upload after unarchive = %d %s", r.status, r.raw)
	}
}
