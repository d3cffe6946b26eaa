// Package browsertest drives Debian's headless Chromium for the tests that
// look at depsd's pages: the dashboard's browser tests and the real chain's
// (e2e), and the screenshots they take for docs/screenshots.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gitlab.com/depsd/depsd/internal/realtest"
)

// PageTimeout bounds each wait on the page; a passing run takes a fraction
// of it, also under -race.
const PageTimeout = 20 * time.Second

// The browser's window, in CSS pixels: a common laptop screen. Its width
// is the screenshots' width; the page's viewport is a little lower than
// the window.
const (
	WindowWidth  = 1366
	WindowHeight = 900
)

// UpdateScreenshots says whether DEPSD_UPDATE_SCREENSHOTS asks the tests
// to write their screenshots under docs/screenshots.
func UpdateScreenshots() bool { return os.Getenv("DEPSD_UPDATE_SCREENSHOTS") != "" }

// Browser is a headless Chromium tab with the console messages it saw.
type Browser struct {
	ctx  context.Context
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// ChromiumPath finds Debian's chromium ($CHROMIUM overrides). Without it
// the test skips, unless the environment expects it (realtest: CI=true,
// DEPSD_REQUIRE=chromium): there it fails.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	var err error
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "chromium"} {
		if p == "" {
			continue
		}
		var path string
		if path, err = exec.LookPath(p); err == nil {
			return path
		}
	}
	realtest.Require(t, realtest.Chromium, false, fmt.Sprintf("apt-get install -y chromium: %v", err))
	return ""
}

// New starts a fresh headless Chromium for the test, closed when it ends.
func New(t testing.TB) *Browser {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(ChromiumPath(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(WindowWidth, WindowHeight),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &Browser{ctx: ctx}
	// Start the browser, then collect the console until the tab closes.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.msgs = append(b.msgs, m)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return b
}

// Context is the tab's context: chromedp actions run on it.
func (b *Browser) Context() context.Context { return b.ctx }

// Errors returns the console errors and exceptions seen so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.msgs {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
		}
	}
	return out
}

// Open loads url and waits for its main heading.
func (b *Browser) Open(t testing.TB, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, PageTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("main h1")); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

// Eval evaluates a JavaScript expression on the open page.
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, PageTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// WaitFor waits until a JavaScript predicate holds on the open page.
func (b *Browser) WaitFor(t testing.TB, what, predicate string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, PageTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(PageTimeout))); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Screenshot writes the open page as a PNG to path (its directory made if
// need be): the viewport, or with full the whole page, WindowWidth wide.
func (b *Browser) Screenshot(t testing.TB, path string, full bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, PageTimeout)
	defer cancel()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100) // quality 100: PNG
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
