package e2e_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

// A push that changes a project's Containerfile puts its new upstream in
// the graph, read from the pushed project alone (the scope is not listed
// again), and the next chain through that upstream builds it.
func TestPushRescansThePushedProjectAlone(t *testing.T) {
	t.Parallel()
	const tool = scopeGroup + "/tool"
	w := startDaemon(t, newGitLab(t, append(linear(), proj{path: tool})...), daemonConfig{})
	listings := w.srv.Requests("GET /groups/:id/projects")
	const scanTook = "depsd_last_scan_duration_seconds"
	fullScan := w.metric(scanTook)

	if _, err := w.srv.SetFile(tool, "Containerfile", proj{path: tool, from: []string{ruby}}.containerfile()); err != nil {
		t.Fatal(err)
	}
	w.waitUntil("tool downstream of ruby", stepTimeout, func() bool { return slices.Contains(w.downstream(ruby), tool) })
	if n := w.srv.Requests("GET /groups/:id/projects") - listings; n != 0 {
		t.Errorf("the push's rescan listed the scope (%d requests), want the pushed project read alone\n%s", n, w.dump())
	}
	if got := w.metric(scanTook); got != fullScan || got == 0 {
		t.Errorf("%s = %v after the push's rescan, want the start-up scan's %v (the scan metrics are of the whole scope)", scanTook, got, fullScan)
	}

	w.runPipeline(base)
	view := w.onlyChain("finished", inState(chain.Finished))
	for _, p := range []string{ruby, app, tool} {
		if m, ok := member(view, p); !ok || m.State != chain.Success || m.Builds != 1 {
			t.Errorf("chain member %s = %+v, want success after 1 build\n%s", p, m, w.dump())
		}
	}
}

// downstream is the downstream of node in GET /api/v1/graph.
func (w *world) downstream(node string) []string {
	w.t.Helper()
	var graph struct {
		Projects []struct {
			Path       string   `json:"path"`
			Downstream []string `json:"downstream"`
		} `json:"projects"`
	}
	resp, err := w.client.Get(w.url + "/api/v1/graph")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&graph); err != nil || resp.StatusCode != http.StatusOK {
		w.t.Fatalf("GET /api/v1/graph: %d, %v", resp.StatusCode, err)
	}
	for _, p := range graph.Projects {
		if p.Path == node {
			return p.Downstream
		}
	}
	return nil
}
