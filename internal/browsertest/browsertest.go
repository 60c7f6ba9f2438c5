// Package browsertest starts headless Chromium for browser tests (chromedp over the DevTools
// protocol) and saves screenshots where a reviewer can open them.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser: $CASEBOOK_CHROMIUM, else chromium on PATH (Debian's package installs
// /usr/bin/chromium; .ci/run installs it). Without one the test is skipped, saying so.
func Chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CASEBOOK_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("browser test skipped: chromium is not installed (apt-get install chromium; .ci/run does it)")
	}
	return p
}

// New starts a headless Chromium with its own profile and returns a tab context bounded by a
// deadline (a bound on a hung browser, not a timing assertion). Further tabs of the same browser
// (sharing its cookies) come from chromedp.NewContext on the returned context.
func New(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// ScreenshotDir is where screenshots go: $CASEBOOK_SCREENSHOTS, else def (relative to the test's
// package directory). It is created if missing.
func ScreenshotDir(t *testing.T, def string) string {
	t.Helper()
	dir := os.Getenv("CASEBOOK_SCREENSHOTS")
	if dir == "" {
		dir = def
	}
	if err := os.MkdirAll(dir, 0o750); err != nil { //nolint:gosec // the directory is the test runner's own choice
		t.Fatal(err)
	}
	return dir
}

// Screenshot saves the whole page of ctx's tab as dir/name.png.
func Screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o600); err != nil {
		t.Fatal(err)
	}
}
