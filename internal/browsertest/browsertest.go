// Package browsertest starts the headless chromium that the browser tests
// (build tag browser) drive through chromedp.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Options size the browser. The zero value means a 1280×860 window and a
// three-minute bound on the whole tab, which only detects a hung test.
type Options struct {
	Timeout       time.Duration
	Width, Height int
}

// ChromiumPath finds the browser: $CHROME, or chromium on the PATH. A
// missing browser fails the test with the command that installs it.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROME"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("$CHROME: %v (apt-get install -y chromium, or set $CHROME to a browser)", err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is missing (apt-get install -y chromium, or set $CHROME)")
	return ""
}

// New starts a headless chromium with a fresh profile and returns a tab's
// context; the tab and the browser are closed when the test ends.
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Width == 0 || o.Height == 0 {
		o.Width, o.Height = 1280, 860
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(o.Width, o.Height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, o.Timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
