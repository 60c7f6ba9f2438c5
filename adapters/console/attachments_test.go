package console_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/browsertest"
)

const pngBytes = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR rest of the image"

// attachFiles stores a PNG and a text file on id and returns them.
func (tb *testBundle) attachFiles(t *testing.T, id domain.InquiryID) []commands.Attachment {
	t.Helper()
	got, err := tb.app.Attachments.Add(t.Context(), tb.acme, id, tb.opP.ID, []commands.NewFile{
		{Name: "scan.png", ContentType: "image/png", Data: []byte(pngBytes)},
		{Name: "call notes.txt", ContentType: "text/plain; charset=utf-8", Data: []byte(strings.Repeat("notes ", 400))},
	}, commands.AttachmentLimits{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestConsoleAttachments: the inquiry page lists each attachment (name, type, size) with a link
// that downloads it for a signed-in reader (a viewer too) as an attachment, nosniff and sandboxed;
// the link fails closed for another tenant's session, for an unknown file and when signed out; an
// inquiry without files shows no attachments section.
func TestConsoleAttachments(t *testing.T) {
	t.Parallel()
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "files-1")
	bare, _ := tb.intake(t, tb.acme, "files-2")
	files := tb.attachFiles(t, id)
	op := tb.client(t)
	op.signIn(tb.op)
	p := op.get("/console/inquiries/" + string(id))
	link := "/console/inquiries/" + string(id) + "/attachments/" + files[0].ID
	for _, want := range []string{`id="attachment-list"`, ">scan.png</a>", "image/png", "call notes.txt", "2.3 KiB", `href="` + link + `"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the inquiry page lacks %q", want)
		}
	}
	if p := op.get("/console/inquiries/" + string(bare)); p.status != 200 || strings.Contains(p.body, `id="attachments"`) {
		t.Errorf("an inquiry without files: %d, attachments section shown", p.status)
	}
	d := op.get(link)
	h := d.header
	if d.status != http.StatusOK || d.body != pngBytes || h.Get("Content-Type") != "image/png" ||
		h.Get("Content-Disposition") != "attachment; filename=scan.png" || h.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("download = %d %v", d.status, h)
	}
	viewer := tb.client(t)
	viewer.signIn(tb.viewer)
	if d := viewer.get(link); d.status != http.StatusOK || d.body != pngBytes {
		t.Errorf("a viewer's download = %d", d.status)
	}
	other := tb.client(t)
	other.signIn(tb.other)
	if d := other.get(link); d.status != http.StatusNotFound || strings.Contains(d.body, "rest of the image") {
		t.Errorf("another tenant's download = %d", d.status)
	}
	if d := op.get("/console/inquiries/" + string(bare) + "/attachments/" + files[0].ID); d.status != http.StatusNotFound {
		t.Errorf("a file under another inquiry = %d", d.status)
	}
	if d := op.get("/console/inquiries/" + string(id) + "/attachments/att_nope"); d.status != http.StatusNotFound {
		t.Errorf("an unknown file = %d", d.status)
	}
	if d := tb.client(t).get(link); d.status != http.StatusSeeOther || strings.Contains(d.body, "rest of the image") {
		t.Errorf("signed out = %d", d.status)
	}
}

// TestConsoleAttachmentsInBrowser: in headless Chromium, an operator signs in and opens the
// inquiry page, which shows the attachments table; the link downloads the file with the session's
// cookie (fetched from the page: the status, disposition and bytes). Screenshot:
// inquiry-attachments.png.
func TestConsoleAttachmentsInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browsertest.New(t)
	dir := browsertest.ScreenshotDir(t, "testdata/screenshots")
	tb := setup(t, embedded(t))
	id, _ := tb.intake(t, tb.acme, "files-b")
	tb.attachFiles(t, id)
	base := tb.srv.URL
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), tb.op), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#q")),
		chromedp.Navigate(base+"/console/inquiries/"+string(id)), chromedp.WaitVisible(chromedp.CSS("#attachment-list"))); err != nil {
		t.Fatalf("open the inquiry: %v", err)
	}
	table, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#attachment-list")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"scan.png", "image/png", "call notes.txt", "2.3 KiB"} {
		if !strings.Contains(table, want) {
			t.Errorf("the attachments table lacks %q: %s", want, table)
		}
	}
	browsertest.Screenshot(t, ctx, dir, "inquiry-attachments")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("a.attachment").href).then(async r =>
		r.status + " " + r.headers.get("content-disposition") + " " + (await r.arrayBuffer()).byteLength)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if want := "200 attachment; filename=scan.png " + strconv.Itoa(len(pngBytes)); got != want {
		t.Fatalf("download from the page = %q, want %q", got, want)
	}
}
