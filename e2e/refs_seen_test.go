package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// A tag no template claims moves with the releases: base's release
// pipelines push base:stable beside base:3.2.2 to a real registry, and app
// is FROM base:stable. depsd first takes stable for base's default
// branch's; once it sees a release push it (the digest base:stable now
// points at is the release's), the next scan maps app to base's releases
// (depsd graph: seen at that pipeline), and the next release rebuilds app.
func TestTagSeenPublishedByAReleaseMovesTheEdge(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t)
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-e2e", RegistryHost: host})
	t.Cleanup(srv.Close)
	stable := host + "/" + base + ":stable"
	for path, cf := range map[string]string{base: "FROM scratch\n", app: "FROM " + stable + "\n"} {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": cf}}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetPipelineBehavior(path, gitlabtest.Behavior{Duration: 100 * time.Millisecond, Outcome: "success", OnTag: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.SetImages(base, gitlabtest.Images{Refs: []string{stable, host + "/" + base + ":3.2.2"}}); err != nil {
		t.Fatal(err)
	}
	w := startDaemon(t, srv, daemonConfig{reconcile: time.Second, edit: func(c *config.Config) {
		c.Images.Verify = config.VerifyEnforce
		c.Images.InsecureRegistries = []string{host}
		c.Refs = []config.Refs{{Projects: []string{base}, Tags: "v*"}}
	}})
	upstreamOfApp := func() (string, deps.EdgeSource, int64) {
		var doc struct {
			Projects []struct {
				Path           string                     `json:"path"`
				Upstream       []string                   `json:"upstream"`
				UpstreamVia    map[string]deps.EdgeSource `json:"upstream_via"`
				UpstreamSeenIn map[string]int64           `json:"upstream_seen_in"`
			} `json:"projects"`
		}
		resp, err := w.client.Get(w.url + "/api/v1/graph")
		if err != nil {
			return "", "", 0
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil {
			return "", "", 0
		}
		for _, p := range doc.Projects {
			if p.Path == app && len(p.Upstream) == 1 {
				u := p.Upstream[0]
				return u, p.UpstreamVia[u], p.UpstreamSeenIn[u]
			}
		}
		return "", "", 0
	}
	if up, via, _ := upstreamOfApp(); up != base || via != deps.EdgeDefault {
		t.Fatalf("app's upstream before any release: %s (%s), want %s (default)\n%s", up, via, base, w.dump())
	}

	// The first release: its pipeline pushes stable.
	if err := srv.CreateTag(base, "v3.2.2", "main"); err != nil {
		t.Fatal(err)
	}
	var release int64
	w.waitUntil("app's base:stable seen published by base's releases", chainTimeout, func() bool {
		up, via, seenIn := upstreamOfApp()
		release = seenIn
		return up == base+"@tags" && via == deps.EdgeSeen && seenIn != 0
	})
	if ps := srv.Pipelines(base); len(ps) != 1 || ps[0].ID != release || !ps[0].Tag {
		t.Errorf("seen at pipeline %d; base's pipelines %+v", release, ps)
	}

	// The next release rebuilds app.
	if err := srv.CreateTag(base, "v3.2.3", "main"); err != nil {
		t.Fatal(err)
	}
	w.waitUntil("app rebuilt after the next release", chainTimeout, func() bool {
		cs, err := w.chains()
		if err != nil {
			return false
		}
		for _, c := range cs {
			if m, ok := member(c, app); ok && c.Roots[0] == base+"@tags" && m.State == chain.Success {
				return true
			}
		}
		return false
	})
	if n := len(w.apiPipelines(app)); n != 1 {
		t.Errorf("app built %d times, want once", n)
	}
}
