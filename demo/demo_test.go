package demo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// TestDemo runs the demo and counts what the simulated GitLab recorded, not
// what the engine says: every project of the sample instance got exactly
// one pipeline created through the API for the chain, in dependency order
// (a project's pipeline was created after its upstreams' finished).
func TestDemo(t *testing.T) {
	var srv *gitlabtest.Server
	var out bytes.Buffer
	err := Run(context.Background(), &out, Options{
		PipelineTime: 50 * time.Millisecond, StateDir: t.TempDir(), Timeout: time.Minute,
		Seeded: func(s *gitlabtest.Server) { srv = s },
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	byPath := map[string]gitlabtest.Pipeline{}
	for _, p := range sampleProjects() {
		var api []gitlabtest.Pipeline
		for _, pl := range srv.Pipelines(p.Path) {
			if pl.Source == "api" {
				api = append(api, pl)
			}
		}
		if len(api) != 1 || api[0].Variables[chain.VarChainID] == "" || api[0].Status != "success" {
			t.Errorf("%s: GitLab recorded %d api pipelines (%+v), want exactly 1, successful, of the chain", p.Path, len(api), api)
			continue
		}
		byPath[p.Path] = api[0]
	}
	for down, ups := range map[string][]string{
		"infra/images/ruby": {"infra/images/base"},
		"apps/shop":         {"infra/images/ruby"},
		"infra/tools/ci":    {"infra/tools/lint", "infra/tools/scan"},
		"apps/docs":         {"apps/shop"},
	} {
		for _, up := range ups {
			if d, u := byPath[down], byPath[up]; d.CreatedAt.Before(u.FinishedAt) {
				t.Errorf("%s created at %s, before its upstream %s finished at %s", down, d.CreatedAt, up, u.FinishedAt)
			}
		}
	}
	// The printed table says the same: one pipeline on GitLab per project.
	rows := regexp.MustCompile(`created on GitLab: (\d+)`).FindAllStringSubmatch(out.String(), -1)
	if len(rows) != len(sampleProjects()) {
		t.Fatalf("%d rows with GitLab's count, want %d:\n%s", len(rows), len(sampleProjects()), out.String())
	}
	for _, r := range rows {
		if r[1] != "1" {
			t.Errorf("row says %s pipelines on GitLab:\n%s", r[1], out.String())
		}
	}
	if !strings.Contains(out.String(), "each built exactly once (as GitLab recorded)") {
		t.Errorf("no summary:\n%s", out.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With Stay the demo prints the dashboard's URL, tells its story, and keeps
// serving the dashboard (showing the finished chain) until ctx ends.
func TestStayKeepsServingTheDashboard(t *testing.T) {
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, out, Options{PipelineTime: 50 * time.Millisecond, StateDir: t.TempDir(), Stay: true})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "press Ctrl-C to stop") {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("demo ended before staying: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("demo did not finish its story:\n%s", out)
		}
	}
	url := regexp.MustCompile(`dashboard: (http://\S+/)`).FindStringSubmatch(out.String())
	if url == nil {
		cancel()
		t.Fatalf("no dashboard URL printed:\n%s", out)
	}
	resp, err := http.Get(url[1])
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `href="/chains/1"`) {
		t.Errorf("dashboard after the demo: %d\n%s", resp.StatusCode, page)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo after Ctrl-C: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop when its context ended")
	}
}

// TestDemoWithRegistry: with a real registry, the simulated pipelines push
// their images and depsd verifies each member's (images.verify: enforce):
// the live view and the final table show the verdicts; the member built on
// the base's previous image is found stale, rebuilt once without cache
// (GitLab records two pipelines of it, the second with DEPSD_NO_CACHE=1)
// and ends fresh; the docs site publishes no image.
func TestDemoWithRegistry(t *testing.T) {
	host := registrytest.Start(t)
	var srv *gitlabtest.Server
	var out bytes.Buffer
	err := Run(context.Background(), &out, Options{PipelineTime: 50 * time.Millisecond, StateDir: t.TempDir(), Timeout: time.Minute, Registry: host,
		Seeded: func(s *gitlabtest.Server) { srv = s }})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	live := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+\+[\d.]+s\s+(\S+)\s+verified\s+images (\w+)`).FindAllStringSubmatch(out.String(), -1) {
		live[m[1]] = append(live[m[1]], m[2])
	}
	final := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\S+)\s+success\s+images (\S+)\s+pipeline`).FindAllStringSubmatch(out.String(), -1) {
		final[m[1]] = m[2]
	}
	want := map[string][]string{
		"infra/images/base": {"unknown"}, // FROM scratch: nothing to judge it against
		"infra/images/ruby": {"fresh"}, "apps/shop": {"fresh"}, "infra/tools/lint": {"fresh"}, "infra/tools/ci": {"fresh"},
		staleMember: {"stale", "fresh"},
	}
	for p, w := range want {
		if strings.Join(live[p], " ") != strings.Join(w, " ") || final[p] != w[len(w)-1] {
			t.Errorf("%s: live view says %v, final table %q; want %v\n%s", p, live[p], final[p], w, out.String())
		}
	}
	if final["apps/docs"] != "-" || len(live["apps/docs"]) > 0 {
		t.Errorf("docs has a verdict: live %v, final %q", live["apps/docs"], final["apps/docs"])
	}
	for _, want := range []string{"(without cache: DEPSD_NO_CACHE=1)", "each built once and 1 once more, without cache, as its images were stale"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the story lacks %q:\n%s", want, out.String())
		}
	}
	var noCache int
	for _, pl := range srv.Pipelines(staleMember) {
		if pl.Source == "api" && pl.Variables["DEPSD_NO_CACHE"] == "1" {
			noCache++
		}
	}
	if noCache != 1 {
		t.Errorf("GitLab recorded %d pipelines of %s with DEPSD_NO_CACHE=1, want 1", noCache, staleMember)
	}
}
