package demo

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
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
