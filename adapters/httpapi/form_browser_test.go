package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/casebook/casebook/internal/browsertest"
)

func browser(t *testing.T) context.Context { return browsertest.New(t) }

// TestFormInBrowser fills and submits the public form in headless Chromium, without JavaScript on
// the page: a person's submission is recorded (the textarea's line break arrives as CRLF and is
// stored as LF, a decomposed accent as NFC); a bot that fills the hidden honeypot gets a receipt and
// nothing is recorded.
func TestFormInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	tb := setup(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(tb.srv.URL+"/f/acme"),
		chromedp.WaitVisible(chromedp.ID("email")),
		// Typed keys cannot carry a lone combining accent; the value can, as a paste would.
		chromedp.SetValue(chromedp.ID("name"), "Ade\u0301la Nova"),
		chromedp.SendKeys(chromedp.ID("email"), "adela@example.com"),
		chromedp.SendKeys(chromedp.ID("subject"), "Parcel missing"),
		chromedp.SendKeys(chromedp.ID("message"), "It never arrived.\nTracking 7."),
		chromedp.Click(chromedp.ID("submit")),
		chromedp.WaitVisible(chromedp.ID("receipt")),
	)
	if err != nil {
		t.Fatalf("browser: %v\nlogs:\n%s", err, tb.logs.String())
	}
	receipt, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("receipt")))
	if err != nil {
		t.Fatal(err)
	}
	if !receiptRE.MatchString(receipt) {
		t.Fatalf("receipt %q", receipt)
	}
	l := tb.do(t, "GET", "/v1/inquiries?consistent=true", tb.admin, nil, "")
	items := l.body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["receipt"] != receipt {
		t.Fatalf("listed = %s", l.raw)
	}
	d := tb.do(t, "GET", "/v1/inquiries/"+items[0].(map[string]any)["id"].(string), tb.admin, nil, "")
	req := d.body["requester"].(map[string]any)
	if req["name"] != "Ad\u00e9la Nova" || d.body["message"] != "It never arrived.\nTracking 7." {
		t.Fatalf("stored name %+q message %+q", req["name"], d.body["message"])
	}

	before := tb.logLen(t)
	err = chromedp.Do(ctx,
		chromedp.Navigate(tb.srv.URL+"/f/acme"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), "bot@example.com"),
		chromedp.SendKeys(chromedp.ID("subject"), "Cheap pills"),
		chromedp.SendKeys(chromedp.ID("message"), "Buy now"),
		chromedp.SetValue(chromedp.ID("website"), "http://spam.example"),
		chromedp.Click(chromedp.ID("submit")),
		chromedp.WaitVisible(chromedp.ID("receipt")),
	)
	if err != nil {
		t.Fatalf("browser (honeypot): %v", err)
	}
	decoy, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("receipt")))
	if err != nil {
		t.Fatal(err)
	}
	if !receiptRE.MatchString(decoy) || decoy == receipt {
		t.Fatalf("decoy receipt %q", decoy)
	}
	if n := tb.logLen(t); n != before {
		t.Fatalf("the honeypot submission appended %d events", n-before)
	}
}

// TestFormCrossOriginInBrowser: a page on another origin posting to the form is refused by the
// browser-reported Origin/Sec-Fetch-Site, until the tenant trusts that origin.
func TestFormCrossOriginInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	tb := setup(t)
	// The foreign page is on localhost, the form on 127.0.0.1: another origin and another site.
	target := tb.srv.URL + "/f/acme"
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s">
<input name="email" value="eve@example.com"><input name="subject" value="Hi"><input name="message" value="From elsewhere">
<button id="go" type="submit">go</button></form>`, target)
	}))
	t.Cleanup(foreign.Close)
	origin := strings.Replace(foreign.URL, "127.0.0.1", "localhost", 1)

	submit := func(id string) (string, error) {
		err := chromedp.Do(ctx,
			chromedp.Navigate(origin),
			chromedp.WaitVisible(chromedp.ID("go")),
			chromedp.Click(chromedp.ID("go")),
			chromedp.WaitVisible(chromedp.ID(id)),
		)
		if err != nil {
			return "", err
		}
		return chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
	}
	msg, err := submit("#error")
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if !strings.Contains(msg, "can only be submitted from its own page") {
		t.Fatalf("cross-origin submission answered %q", msg)
	}
	if n := tb.logLen(t); n != 0 {
		t.Fatalf("a refused cross-origin submission appended %d events", n)
	}
	if _, err := tb.app.Tenancy.SetOrigins(t.Context(), "acme", []string{origin}); err != nil {
		t.Fatal(err)
	}
	receipt, err := submit("#receipt")
	if err != nil {
		t.Fatalf("browser (trusted origin): %v\nlogs:\n%s", err, tb.logs.String())
	}
	if !receiptRE.MatchString(receipt) || tb.logLen(t) != 1 {
		t.Fatalf("trusted origin: receipt %q, %d events", receipt, tb.logLen(t))
	}
}
