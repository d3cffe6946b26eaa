package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/internal/realtest"
)

// alertsFile is the shipped alerting rules, relative to this package.
const alertsFile = "../packaging/prometheus/depsd-alerts.yml"

// alertTimeout bounds the wait for an alert: depsd refreshes its store
// gauges every 5 s, and Prometheus scrapes and evaluates every second.
const alertTimeout = 45 * time.Second

// serveWithHooks starts `depsd serve` against an instance where a's first
// pipeline fails, with hooks.url set (the leader checks the hooks, so
// depsd_webhooks is exported) and its hooks installed.
func serveWithHooks(t *testing.T) (*world, *serveSetup) {
	t.Helper()
	srv := newGitLab(t, diamond("failed")...)
	setup := newServeSetup(t, srv)
	cfgPath := filepath.Join(setup.dir, "depsd.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = fmt.Appendf(cfg, "hooks:\n  url: http://%s/hooks/gitlab\n", setup.listen)
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))
	setup.start(t)
	return w, setup
}

// blockThenUnblock runs base: a fails and the chain is blocked (between
// the two, during is called); a's next pipeline succeeds and the chain
// finishes.
func (w *world) blockThenUnblock(during func()) {
	w.t.Helper()
	w.runPipeline(base)
	w.onlyChain("blocked", inState(chain.Blocked))
	during()
	w.runPipeline(projA)
	w.onlyChain("finished", inState(chain.Finished))
}

// prometheusServer is a real Prometheus (Debian's package) scraping depsd.
type prometheusServer struct {
	url    string
	client *http.Client
}

// startPrometheus runs Prometheus on 127.0.0.1 with its own storage,
// scraping target every second and evaluating ruleFiles every second, and
// stops it when the test ends.
func startPrometheus(t *testing.T, target string, ruleFiles ...string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	realtest.Require(t, realtest.Prometheus, err == nil, fmt.Sprintf("prometheus not installed (Debian package prometheus): %v", err))
	dir := t.TempDir()
	rules := ""
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		rules += fmt.Sprintf("  - %q\n", abs)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
%sscrape_configs:
  - job_name: depsd
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs.tail(30))
		}
	})
	p := &prometheusServer{url: "http://" + addr, client: newHTTPClient(t)}
	if !eventually(stepTimeout, func() bool {
		resp, err := p.client.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("prometheus not ready after %s:\n%s", stepTimeout, logs.tail(30))
	}
	return p
}

// alert is one entry of Prometheus's GET /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
}

func (p *prometheusServer) alerts(t *testing.T) []alert {
	t.Helper()
	resp, err := p.client.Get(p.url + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("GET /api/v1/alerts: %s %v", body.Status, err)
	}
	return body.Data.Alerts
}

// firing returns the firing alert named name, if there is one.
func (p *prometheusServer) firing(t *testing.T, name string) (alert, bool) {
	for _, a := range p.alerts(t) {
		if a.Labels["alertname"] == name && a.State == "firing" {
			return a, true
		}
	}
	return alert{}, false
}

// The shipped rules, loaded by a real Prometheus scraping a real `depsd
// serve`: a chain blocked on the fake GitLab fires DepsdChainBlocked
// (its threshold lowered to a second by a recording rule, as an operator
// overrides it), and the alert goes away once the chain moves on; a
// healthy depsd fires nothing else.
func TestPrometheusFiresBlockedChainAlert(t *testing.T) {
	t.Parallel()
	w, setup := serveWithHooks(t)
	thresholds := filepath.Join(t.TempDir(), "thresholds.yml")
	if err := os.WriteFile(thresholds, []byte(`groups:
  - name: depsd-thresholds
    rules:
      - record: depsd:threshold:chain_blocked_seconds
        expr: vector(1)
`), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, setup.listen, alertsFile, thresholds)

	// Healthy: depsd scraped, leading, its store up; nothing fires.
	w.waitUntil("Prometheus sees depsd lead", alertTimeout, func() bool {
		v, ok := prom.query(t, `depsd_leader{job="depsd"} == 1 and on() depsd_store_up == 1`)
		return ok && v == 1
	})
	for _, a := range prom.alerts(t) {
		if a.State == "firing" {
			t.Fatalf("alert %s fires before anything went wrong: %v", a.Labels["alertname"], a.Annotations["summary"])
		}
	}

	w.blockThenUnblock(func() {
		var a alert
		w.waitUntil("DepsdChainBlocked fires", alertTimeout, func() bool {
			var ok bool
			a, ok = prom.firing(t, "DepsdChainBlocked")
			return ok
		})
		if a.Labels["severity"] != "warning" || a.Labels["job"] != "depsd" || a.Annotations["summary"] == "" {
			t.Errorf("DepsdChainBlocked = %+v, want severity warning, job depsd, a summary", a)
		}
	})
	w.waitUntil("DepsdChainBlocked resolves once the chain finished", alertTimeout, func() bool {
		_, ok := prom.firing(t, "DepsdChainBlocked")
		return !ok
	})
	for _, a := range prom.alerts(t) {
		if a.State == "firing" {
			t.Errorf("alert %s fires on a healthy depsd: %v", a.Labels["alertname"], a.Annotations["summary"])
		}
	}
}

// query evaluates expr now and returns the value of its only sample (ok
// false when it has none or several).
func (p *prometheusServer) query(t *testing.T, expr string) (float64, bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url+"/api/v1/query", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := req.URL.Query()
	q.Set("query", expr)
	req.URL.RawQuery = q.Encode()
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %s %s %v", expr, body.Status, body.Error, err)
	}
	if len(body.Data.Result) != 1 {
		return 0, false
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	var v float64
	_, err = fmt.Sscan(s, &v)
	return v, err == nil
}
