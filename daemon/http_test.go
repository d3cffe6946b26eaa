package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gitlab.com/depsd/depsd/buildinfo"
	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// TestAPIRejectsBadQuery: a bad query parameter is a 400 with a JSON error
// naming the parameter and what it takes, not an empty answer (issue 12:
// ?state=bogus answered {"chains": null}).
func TestAPIRejectsBadQuery(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{store: st, engine: engine, webhook: http.NotFoundHandler(), metrics: newMetrics(true), ready: func(context.Context) error { return nil }}
	h, _ := a.routes(false)
	srv := httptest.NewServer(h)
	defer srv.Close()
	tests := []struct {
		query string
		code  int
		want  string
	}{
		{"state=bogus", http.StatusBadRequest, `state "bogus": want one of running, blocked, finished, expired, canceled, merged`},
		{"limit=0", http.StatusBadRequest, "limit: want a positive number"},
		{"state=running", http.StatusOK, `"chains"`},
		{"", http.StatusOK, `"chains"`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/api/v1/chains?" + tt.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			b, _ := json.Marshal(body)
			if resp.StatusCode != tt.code || !strings.Contains(string(b), strings.ReplaceAll(tt.want, `"`, `\"`)) && !strings.Contains(string(b), tt.want) {
				t.Errorf("GET ?%s: %d %s, want %d containing %s", tt.query, resp.StatusCode, b, tt.code, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
		})
	}
}

// TestBuildInfoMetric: which build runs is visible in /metrics.
func TestBuildInfoMetric(t *testing.T) {
	m := newMetrics(true)
	srv := httptest.NewServer(promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := `depsd_build_info{goversion="` + runtime.Version() + `",revision="` + buildinfo.Get().Revision + `",version="` + buildinfo.Version() + `"} 1`
	if !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %s", want)
	}
}
