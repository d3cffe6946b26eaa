package daemon

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"gitlab.com/depsd/depsd/verify"
)

// TestImageStaleGauges: an image is stale when any of its platforms is,
// for as long as its stalest one; a fresh or unknown image reads 0, and an
// image no longer verified leaves the gauges.
func TestImageStaleGauges(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m := newMetrics(true)
	gauge := func(v interface{ Write(*dto.Metric) error }) float64 {
		var out dto.Metric
		if err := v.Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetGauge().GetValue()
	}
	m.observeFreshness([]verify.Row{
		{Project: "apps/shop", Image: "r/apps/shop:latest", Platform: "linux/amd64", State: verify.StateStale, StaleSince: now.Add(-time.Hour)},
		{Project: "apps/shop", Image: "r/apps/shop:latest", Platform: "linux/arm64", State: verify.StateStale, StaleSince: now.Add(-2 * time.Hour)},
		{Project: "apps/web", Image: "r/apps/web:latest", Platform: "linux/amd64", State: verify.StateFresh},
		{Project: "apps/cli", Image: "r/apps/cli:1", Platform: "linux/amd64", State: verify.StateUnknown},
		{Project: "apps/pin", Image: "r/apps/pin:1", Platform: "linux/amd64", State: verify.StateFresh},
		{Project: "apps/pin", Image: "r/apps/pin:1", Platform: "linux/arm64", State: verify.StatePinned},
	}, now)
	// Each image once, in its stalest platform's state; every state has
	// its series.
	want := map[verify.State]float64{verify.StateStale: 1, verify.StatePinned: 1, verify.StateUnknown: 1, verify.StateFresh: 1}
	for _, s := range verify.States() {
		if got := gauge(m.imagesByState.WithLabelValues(string(s))); got != want[s] {
			t.Errorf("depsd_images{state=%s} = %v, want %v", s, got, want[s])
		}
	}
	for _, tc := range []struct {
		project, image string
		stale, seconds float64
	}{
		{"apps/shop", "r/apps/shop:latest", 1, 7200},
		{"apps/web", "r/apps/web:latest", 0, 0},
		{"apps/cli", "r/apps/cli:1", 0, 0},
		{"apps/pin", "r/apps/pin:1", 0, 0}, // pinned is not stale
	} {
		if got := gauge(m.imageStale.WithLabelValues(tc.project, tc.image)); got != tc.stale {
			t.Errorf("depsd_image_stale{%s,%s} = %v, want %v", tc.project, tc.image, got, tc.stale)
		}
		if got := gauge(m.staleSeconds.WithLabelValues(tc.project, tc.image)); got != tc.seconds {
			t.Errorf("depsd_image_stale_seconds{%s,%s} = %v, want %v", tc.project, tc.image, got, tc.seconds)
		}
	}
	m.observeFreshness(nil, now)
	if n, err := m.registry.Gather(); err != nil {
		t.Fatal(err)
	} else {
		for _, f := range n {
			if f.GetName() == "depsd_image_stale" && len(f.GetMetric()) > 0 {
				t.Errorf("depsd_image_stale keeps %d images no longer verified", len(f.GetMetric()))
			}
		}
	}
}

// TestMetricsNameNoProjectByDefault: with metrics.project_labels off (the
// default), /metrics carries no project path: the stale images are
// counted and the longest staleness kept, in one series each.
func TestMetricsNameNoProjectByDefault(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m := newMetrics(false)
	m.observeFreshness([]verify.Row{
		{Project: "apps/shop", Image: "r/apps/shop:latest", Platform: "linux/amd64", State: verify.StateStale, StaleSince: now.Add(-time.Hour)},
		{Project: "apps/cart", Image: "r/apps/cart:latest", Platform: "linux/amd64", State: verify.StateStale, StaleSince: now.Add(-2 * time.Hour)},
		{Project: "apps/web", Image: "r/apps/web:latest", Platform: "linux/amd64", State: verify.StateFresh},
	}, now)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if strings.Contains(body, "apps/") || strings.Contains(body, "project=") {
		t.Errorf("/metrics names a project:\n%s", body)
	}
	for _, want := range []string{"\ndepsd_image_stale 2\n", "\ndepsd_image_stale_seconds 7200\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", strings.TrimSpace(want))
		}
	}
}
