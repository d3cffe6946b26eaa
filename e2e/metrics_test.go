package e2e_test

import (
	"encoding/json"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// dashboardFile is the shipped Grafana dashboard, relative to this package.
const dashboardFile = "../packaging/grafana/depsd.json"

// grafanaVariables stand in for what Grafana substitutes in a query before
// Prometheus sees it.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "${job}", "depsd", "$job", "depsd")

// dashboardQueries are the PromQL queries of the dashboard's panels (and
// of its variables), by panel title.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string]string{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			out[p.Title+" #"+string(rune('A'+i))] = grafanaVariables.Replace(tg.Expr)
		}
	}
	// label_values(depsd_build_info, job) is Grafana's, not PromQL: the
	// metric it names is what must exist.
	out["variable job"] = "depsd_build_info"
	return out
}

// alertQueries are the expressions of the shipped alerting rules, by alert.
func alertQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	return out
}

// metricNames parses expr with Prometheus's own parser and returns the
// metric names its selectors read. Recording rules (names with a colon,
// such as the operator's depsd:threshold:*) are not depsd's to export.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" {
				name = m.Value
			}
		}
		if name != "" && !strings.Contains(name, ":") {
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// exported returns the metric names in a /metrics exposition: each
// family, and for histograms and summaries their _bucket, _sum and _count.
func exported(text string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		out[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				out[f[2]+suffix] = true
			}
		}
	}
	return out
}

// Every metric the Grafana dashboard and the alerting rules query is in
// /metrics of a running `depsd serve` that has been through a chain
// blocked and then finished, and every query is PromQL Prometheus parses:
// a renamed metric breaks this test, not an operator's dashboard.
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	t.Parallel()
	w, _ := serveWithHooks(t)
	w.blockThenUnblock(func() {})
	// The leader checks the hooks at the start of its term: wait for it.
	w.waitUntil("the hooks checked", stepTimeout, func() bool { return w.metric(`depsd_webhooks{state="ok"}`) > 0 })

	resp, err := w.client.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	have := exported(string(body))
	queries := dashboardQueries(t)
	maps.Copy(queries, alertQueries(t))
	if len(queries) < 10 {
		t.Fatalf("only %d queries read from the dashboard and the rules", len(queries))
	}
	for _, where := range slices.Sorted(maps.Keys(queries)) {
		names, err := metricNames(queries[where])
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", where, queries[where], err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric", where, queries[where])
		}
		for _, n := range names {
			if !have[n] && !perImage(t, n) {
				t.Errorf("%s queries %s, which depsd's /metrics does not have", where, n)
			}
		}
	}
}

// perImageMetrics have a series per verified image: /metrics has them only
// once an image was verified, which this test's daemon (images.verify off,
// its fake's images on a registry that is not there) never does;
// daemon's TestImageStaleGauges sees them exported after a verification.
var perImageMetrics = []string{"depsd_image_stale", "depsd_image_stale_seconds"}

// perImage reports whether name is one of perImageMetrics, and checks that
// daemon/metrics.go still defines it, so that a renamed metric still
// breaks this test.
func perImage(t *testing.T, name string) bool {
	t.Helper()
	if !slices.Contains(perImageMetrics, name) {
		return false
	}
	src, err := os.ReadFile("../daemon/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(src), `Name: "`+name+`"`)
}
