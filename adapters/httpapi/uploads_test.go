package httpapi_test

import (
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
)

var pngHead = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

// TestAttachmentFileName: the stored name has no path, control or bidi characters and a bounded
// length, and its extension matches the sniffed type: a matching one is kept, a dangerous one on
// text is refused (415), any other is replaced by the type's own.
func TestAttachmentFileName(t *testing.T) {
	t.Parallel()
	const text, png, pdf, jpeg = "text/plain; charset=utf-8", "image/png", "application/pdf", "image/jpeg"
	for _, c := range []struct{ client, ct, want string }{
		{"notes.txt", text, "notes.txt"},
		{"scan.JPEG", jpeg, "scan.JPEG"},
		{"x.exe", png, "x.png"},
		{"x.scr", png, "x.png"},
		{"invoice.pdf.exe", pdf, "invoice.pdf.pdf"},
		{"photo.svg", png, "photo.png"},
		{"page.html", png, "page.png"},
		{"report", pdf, "report.pdf"},
		{"data.json", text, "data.txt"},
		{"../../etc/passwd", text, "passwd.txt"},
		{`C:\Users\a\evil.txt`, text, "evil.txt"},
		{"x.exe. . ", png, "x.png"},
		{"inv\u202eexe.txt", text, "invexe.txt"},
		{"a\x00b\x1b.txt", text, "ab.txt"},
		{".png", png, "png.png"},
		{"", text, "attachment.txt"},
		{strings.Repeat("n", 300) + ".png", png, strings.Repeat("n", commands.MaxAttachmentName-4) + ".png"},
		{"page.html", text, ""},
		{"page.HTM", text, ""},
		{"image.svg", text, ""},
		{"app.hta", text, ""},
		{"run.js", text, ""},
		{"run.bat", text, ""},
		{"run.cmd", text, ""},
		{"run.ps1", text, ""},
		{"setup.msi", text, ""},
		{"x.exe", text, ""},
		{"x.txt", "text/html; charset=utf-8", ""},
	} {
		got, err := httpapi.AttachmentFileName(c.client, c.ct)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), "not accepted") {
				t.Errorf("AttachmentFileName(%q, %s) = %q, %v; want refused", c.client, c.ct, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("AttachmentFileName(%q, %s) = %q, %v; want %q", c.client, c.ct, got, err, c.want)
		}
	}
}

// TestAttachmentDangerousNames: through the route, PNG bytes named x.exe are stored and served as
// x.png; text named .html, .svg or .hta is 415 with a message naming the extension, and nothing is
// stored; the download carries attachment, nosniff and a sandboxing CSP.
func TestAttachmentDangerousNames(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	_, id := tb.submit(t, "names-1")
	for _, name := range []string{"page.html", "image.svg", "app.hta"} {
		r := tb.attach(t, tb.op, id, upload{"ok.txt", "fine"}, upload{name, "<svg onload=alert(1)>"})
		if r.status != http.StatusUnsupportedMediaType || !strings.Contains(r.raw, name[strings.LastIndex(name, "."):]) {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	if got := tb.attachments(t, id); len(got) != 0 {
		t.Fatalf("refused uploads stored %v", got)
	}
	r := tb.attach(t, tb.op, id, upload{"x.exe", pngHead + "rest"})
	if r.status != http.StatusCreated {
		t.Fatalf("png named x.exe: %d %s", r.status, r.raw)
	}
	att := r.body["items"].([]any)[0].(map[string]any)
	if att["name"] != "x.png" || att["content_type"] != "image/png" {
		t.Fatalf("stored as %v", att)
	}
	d := tb.do(t, "GET", "/v1/inquiries/"+id+"/attachments/"+att["id"].(string), tb.op, nil, "")
	h := d.header
	if d.status != 200 || d.raw != pngHead+"rest" || h.Get("Content-Disposition") != `attachment; filename=x.png` ||
		h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") ||
		h.Get("Content-Type") != "image/png" {
		t.Fatalf("download = %d %v", d.status, h)
	}
}

func (tb *testBundle) chunks(t *testing.T, slug string) int {
	t.Helper()
	ten, err := tb.app.Tenancy.TenantBySlug(t.Context(), slug)
	if err != nil {
		t.Fatal(err)
	}
	n, err := tb.app.Attachments.Chunks(t.Context(), ten.ID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUploadTooLargeRecordsNothing: a request whose second file is over the size limit (after a
// first file of several chunks streamed into storage) is 413; nothing is listed and no chunk is
// left, on the operator route and on a portal intake (no inquiry either).
func TestUploadTooLargeRecordsNothing(t *testing.T) {
	t.Parallel()
	tb := setupWith(t, func(c *app.Config) {
		c.Attachments = commands.AttachmentLimits{MaxFileBytes: 3 * commands.AttachmentChunkSize}
	})
	_, id := tb.submit(t, "big-1")
	first := upload{"first.txt", strings.Repeat("a", 2*commands.AttachmentChunkSize+7)}
	big := upload{"big.txt", strings.Repeat("b", 3*commands.AttachmentChunkSize+1)}
	r := tb.attach(t, tb.op, id, first, big)
	if r.status != http.StatusRequestEntityTooLarge || r.code() != "file_too_large" {
		t.Fatalf("over the limit: %d %s", r.status, r.raw)
	}
	if got := tb.attachments(t, id); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
	integ := tb.integration(t, "acme", "Portal")
	if r := tb.portalMultipart(t, integ, "big-k", portalBody, first, big); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("portal over the limit: %d %s", r.status, r.raw)
	}
	if l := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.op, nil, ""); len(l.body["items"].([]any)) != 1 {
		t.Fatalf("inquiries = %s", l.raw)
	}
	if n := tb.chunks(t, "acme"); n != 0 {
		t.Fatalf("%d chunks left behind", n)
	}
	// Within the limit, the same first file is stored and downloads whole.
	r = tb.attach(t, tb.op, id, first)
	if r.status != http.StatusCreated {
		t.Fatalf("upload = %d %s", r.status, r.raw)
	}
	att := r.body["items"].([]any)[0].(map[string]any)
	if d := tb.do(t, "GET", "/v1/inquiries/"+id+"/attachments/"+att["id"].(string), tb.op, nil, ""); d.status != 200 || d.raw != first.content {
		t.Fatalf("download = %d, %d bytes", d.status, len(d.raw))
	}
}

// holdUpload starts an upload of a file to id through h that stays in flight (the handler has
// read its first bytes, so it holds its slots) until finish is called; finish returns its status.
func holdUpload(t *testing.T, h http.Handler, token, id string) (finish func() int) {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req := httptest.NewRequest(http.MethodPost, "/v1/inquiries/"+id+"/attachments", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(rec, req) }()
	part, err := mw.CreateFormFile("file", "slow.txt")
	if err != nil {
		t.Fatal(err)
	}
	// A write to the pipe returns once the handler has read it.
	if _, err := part.Write([]byte("the first bytes of a slow upload")); err != nil {
		t.Fatal(err)
	}
	return func() int {
		_ = mw.Close()
		_ = pw.Close()
		<-done
		return rec.Code
	}
}

// TestUploadConcurrencyLimit: with one upload per principal, a second upload of that principal
// while the first is still streaming is 429 with Retry-After, and another principal is not held
// up; with one upload per tenant, another principal of the tenant is 429 too (operator route and
// portal intake) while another tenant is not; once the first finishes it is 201 and the next
// upload is accepted.
func TestUploadConcurrencyLimit(t *testing.T) {
	t.Parallel()
	for _, perTenant := range []bool{false, true} {
		t.Run("per tenant "+strconv.FormatBool(perTenant), func(t *testing.T) {
			t.Parallel()
			tb := setupWith(t, func(c *app.Config) {
				if perTenant {
					c.Uploads.ConcurrentPerTenant = 1
				} else {
					c.Uploads.ConcurrentPerPrincipal = 1
				}
			})
			_, id := tb.submit(t, "conc-1")
			// The held upload goes straight to a handler; the others to a server of the same
			// handler, sharing its limits.
			h := tb.app.Handler()
			tc := *tb
			tc.srv = httptest.NewServer(h)
			t.Cleanup(tc.srv.Close)
			finish := holdUpload(t, h, tb.op, id)
			r := tc.attach(t, tb.op, id, upload{"b.txt", "second"})
			if r.status != http.StatusTooManyRequests || r.code() != "too_many_uploads" || r.header.Get("Retry-After") != "5" {
				t.Fatalf("second upload = %d %v %s", r.status, r.header, r.raw)
			}
			integ := tb.integration(t, "acme", "Portal")
			want := http.StatusCreated
			if perTenant {
				want = http.StatusTooManyRequests
			}
			if r := tc.portalMultipart(t, integ, "k-c", portalBody, upload{"c.txt", "third"}); r.status != want {
				t.Fatalf("another principal of the tenant = %d %s, want %d", r.status, r.raw, want)
			}
			other := tb.integration(t, "globex", "Portal")
			if r := tc.portalMultipart(t, other, "k-o", portalBody, upload{"o.txt", "other"}); r.status != http.StatusCreated {
				t.Fatalf("another tenant = %d %s", r.status, r.raw)
			}
			if code := finish(); code != http.StatusCreated {
				t.Fatalf("the held upload = %d", code)
			}
			if r := tc.attach(t, tb.op, id, upload{"b.txt", "second"}); r.status != http.StatusCreated {
				t.Fatalf("after the first = %d %s", r.status, r.raw)
			}
		})
	}
}

// TestUploadByteBudget: bytes per minute, per principal and per tenant (a fixed clock, so nothing
// refills). A body of known length is taken whole before it is read: one that does not fit the
// budget left is 429 with Retry-After; one larger than the budget itself is 413. A chunked body is
// metered as it streams and refused 429 past the budget, with nothing stored or left behind. The
// tenant's budget binds its other principals; another tenant is unaffected.
func TestUploadByteBudget(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	tb := setupWith(t, func(c *app.Config) {
		c.Public.Now = func() time.Time { return at }
		c.Uploads = httpapi.UploadLimits{BytesPerMinutePrincipal: 200 << 10, BytesPerMinuteTenant: 300 << 10}
	})
	_, id := tb.submit(t, "bytes-1")
	if r := tb.attach(t, tb.op, id, upload{"a.txt", strings.Repeat("a", 150<<10)}); r.status != http.StatusCreated {
		t.Fatalf("within the budget = %d %s", r.status, r.raw)
	}
	r := tb.attach(t, tb.op, id, upload{"b.txt", strings.Repeat("b", 100<<10)})
	if r.status != http.StatusTooManyRequests || r.code() != "upload_rate_limited" {
		t.Fatalf("over the budget = %d %s", r.status, r.raw)
	}
	// About 50 KiB short at 200 KiB a minute: some 15 s.
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 10 || s > 20 {
		t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
	}
	if r := tb.attach(t, tb.op, id, upload{"c.txt", strings.Repeat("c", 250<<10)}); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("larger than the budget = %d %s", r.status, r.raw)
	}
	// A chunked body of unknown length is metered as it streams.
	var body strings.Builder
	mw := multipart.NewWriter(&body)
	part, _ := mw.CreateFormFile("file", "d.txt")
	_, _ = part.Write([]byte(strings.Repeat("d", 100<<10)))
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, tb.srv.URL+"/v1/inquiries/"+id+"/attachments", io.MultiReader(strings.NewReader(body.String())))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tb.op)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || req.ContentLength > 0 {
		t.Fatalf("chunked over the budget = %d %v", res.StatusCode, res.Header)
	}
	if got := tb.attachments(t, id); len(got) != 1 {
		t.Fatalf("stored %v", got)
	}
	if n := tb.chunks(t, "acme"); n != 1 {
		t.Fatalf("%d chunks stored, want the first file's one", n)
	}
	// The tenant has 150 KiB left: another of its principals cannot send 160 KiB.
	integ := tb.integration(t, "acme", "Portal")
	if r := tb.portalMultipart(t, integ, "k-1", portalBody, upload{"s.txt", strings.Repeat("y", 160<<10)}); r.status != http.StatusTooManyRequests {
		t.Fatalf("past the tenant's budget = %d %s", r.status, r.raw)
	}
	otherInteg := tb.integration(t, "globex", "Portal")
	if r := tb.portalMultipart(t, otherInteg, "k-2", portalBody, upload{"s.txt", strings.Repeat("z", 160<<10)}); r.status != http.StatusCreated {
		t.Fatalf("another tenant = %d %s", r.status, r.raw)
	}
}
