package browsertest_test

import (
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/internal/browsertest"
)

// page is 2,000 CSS pixels tall: more than the viewport.
const page = `<!doctype html><html><body style="margin:0"><main><h1>depsd</h1>
<div id="tall" style="height:2000px;background:#357"></div></main>
<script>console.error("seen by Errors")</script></body></html>`

// The screenshots under docs/screenshots come from Screenshot: a PNG of
// the viewport's width, the viewport's height or, with full, the page's.
func TestScreenshot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	b := browsertest.New(t)
	b.Open(t, srv.URL)
	b.WaitFor(t, "the page laid out", `document.getElementById("tall").offsetHeight === 2000`)
	if h := browsertest.Eval[string](t, b, `document.querySelector("main h1").textContent`); h != "depsd" {
		t.Errorf("Eval of the heading: %q", h)
	}
	dir := t.TempDir()
	viewport := browsertest.Eval[int](t, b, `window.innerHeight`)
	whole := browsertest.Eval[int](t, b, `document.documentElement.scrollHeight`)
	if viewport >= whole {
		t.Fatalf("the page (%d px) fits the viewport (%d px): full cannot be told from the viewport", whole, viewport)
	}
	for _, tc := range []struct {
		name          string
		full          bool
		width, height int
	}{
		{"viewport", false, browsertest.WindowWidth, viewport},
		{"full", true, browsertest.WindowWidth, whole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "shots", tc.name+".png")
			b.Screenshot(t, path, tc.full)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("%s is no PNG: %v", path, err)
			}
			if got := img.Bounds().Size(); got.X != tc.width || got.Y != tc.height {
				t.Errorf("%s is %dx%d, want %dx%d", tc.name, got.X, got.Y, tc.width, tc.height)
			}
		})
	}
	if errs := b.Errors(); !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "seen by Errors") }) {
		t.Errorf("Errors() = %q, want the page's console.error", errs)
	}
}
