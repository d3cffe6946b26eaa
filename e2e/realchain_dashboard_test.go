package e2e_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/internal/browsertest"
)

// dashboardAfterChain: after a real chain, depsd serve's dashboard, in
// Chromium, shows every image fresh with the digest the registry holds
// and, for each upstream, the digest it was built on, which is the
// upstream's current one; the chain's page shows each member's verdict.
// With DEPSD_UPDATE_SCREENSHOTS (make screenshots-real) it writes both
// pages to docs/screenshots/real-freshness.png and real-chain.png.
func (rc *realChain) dashboardAfterChain(run chainRun) func(t *testing.T) {
	return func(t *testing.T) {
		b := browsertest.New(t)
		all := append([]string{rcBase}, rcDownstream...)

		b.Open(t, rc.w.url+"/freshness")
		rows := browsertest.Eval[[]string](t, b, `Array.from(document.querySelectorAll("#freshness tbody tr")).map(r => r.dataset.project + " " + r.dataset.state)`)
		var want []string
		for _, p := range all {
			want = append(want, p+" fresh")
		}
		slices.Sort(rows)
		slices.Sort(want)
		if !slices.Equal(rows, want) {
			t.Errorf("the Freshness page's rows: %q, want %q", rows, want)
		}
		for _, p := range all {
			text := browsertest.Eval[string](t, b, `(document.querySelector('#freshness tr[data-project="`+p+`"]') || {innerText: ""}).innerText`)
			text = strings.Join(strings.Fields(text), " ")
			up := rc.reg + "/ext/busybox:latest"
			if p != rcBase {
				up = rc.ref(rcFrom[p])
			}
			upDigest := digestOf(t, rc, up)
			// The image's own digest, and the upstream's as built on
			// (current: no arrow to another).
			for _, want := range []string{rc.ref(p), shortDigest(digestOf(t, rc, rc.ref(p))), up + " " + shortDigest(upDigest) + " ✓ fresh"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s's row lacks %q: %s", p, want, text)
				}
			}
		}
		if browsertest.UpdateScreenshots() {
			b.Screenshot(t, filepath.Join("..", "docs", "screenshots", "real-freshness.png"), true)
		}

		b.Open(t, fmt.Sprintf("%s/chains/%d", rc.w.url, run.view.ID))
		for _, p := range rcDownstream {
			got := browsertest.Eval[string](t, b, `(document.querySelector('tr[data-member="`+p+`"]') || {innerText: ""}).innerText`)
			if !strings.Contains(got, "success") || !strings.Contains(got, "✓ fresh") {
				t.Errorf("chain %d's page shows %s as %q, want success and ✓ fresh", run.view.ID, p, strings.Join(strings.Fields(got), " "))
			}
		}
		if browsertest.UpdateScreenshots() {
			b.Screenshot(t, filepath.Join("..", "docs", "screenshots", "real-chain.png"), true)
		}
		if errs := b.Errors(); len(errs) > 0 {
			t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
		}
	}
}

// digestOf is the current manifest digest of ref in the chain's registry.
func digestOf(t *testing.T, rc *realChain, ref string) string {
	t.Helper()
	m, err := rc.rdr.Manifest(t.Context(), ref)
	if err != nil {
		t.Fatalf("read %s: %v", ref, err)
	}
	return m.Digest
}

// shortDigest is a digest as the pages cut it.
func shortDigest(d string) string { return d[:len("sha256:")+12] }
