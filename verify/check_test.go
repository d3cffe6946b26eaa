package verify_test

import (
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
)

// The check a success will run, end to end: the fake GitLab's pipelines
// push real images to the real registry, and each check verifies a
// project's image against the history earlier checks recorded in a real
// store. A downstream not rebuilt after its base moved is stale, a
// rebuild makes it fresh, a rebuild on the old base (a stale cache) is
// stale again, and depsd freshness's rows say since when.
func TestCheckRecordsAndJudgesAgainstHistory(t *testing.T) {
	host := registrytest.Start(t)
	gl := gitlabtest.New(gitlabtest.Options{RegistryHost: host, Pipelines: gitlabtest.Behavior{Duration: time.Millisecond}})
	defer gl.Close()
	ruby, shop := host+"/base/ruby:latest", host+"/apps/shop:latest"
	for path, im := range map[string]gitlabtest.Images{
		"base/ruby": {},
		"apps/shop": {From: ruby, Annotate: true},
	} {
		if _, err := gl.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": "FROM scratch\n"}}); err != nil {
			t.Fatal(err)
		}
		im.Refs = []string{host + "/" + path + ":latest"}
		if err := gl.SetImages(path, im); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	c := &verify.Checker{
		Verifier: verify.New(registry.New(registry.Options{Insecure: []string{host}}), verify.Options{}),
		Store:    st,
		Now:      func() time.Time { return clock },
	}
	amd64 := []deps.Platform{{OS: "linux", Architecture: "amd64"}}
	images := map[string][]verify.Image{
		"base/ruby": {{Image: ruby}},
		"apps/shop": {{Image: shop, Upstreams: []string{ruby}}},
	}
	succeed := func(project string) verify.State {
		t.Helper()
		clock = clock.Add(time.Hour)
		id, err := gl.RunPipeline(project, "", "push")
		if err != nil {
			t.Fatal(err)
		}
		if pl, err := gl.WaitPipeline(t.Context(), id); err != nil || pl.Status != "success" {
			t.Fatalf("%s pipeline: %+v, %v", project, pl, err)
		}
		return check(t, c, project, images[project], amd64)
	}
	succeed("base/ruby")
	if got := succeed("apps/shop"); got != verify.StateFresh {
		t.Errorf("shop built on the current ruby: %s", got)
	}
	succeed("base/ruby") // ruby moves at 03:00
	moved := clock
	if got := check(t, c, "apps/shop", images["apps/shop"], amd64); got != verify.StateStale {
		t.Errorf("shop not rebuilt after ruby moved: %s, want stale", got)
	}
	if got := succeed("apps/shop"); got != verify.StateFresh {
		t.Errorf("shop rebuilt: %s, want fresh", got)
	}
	first := gl.PublishedImages()[0].Digest
	gl.PlanPublish("apps/shop", gitlabtest.PublishPlan{From: first})
	if got := succeed("apps/shop"); got != verify.StateStale {
		t.Errorf("shop rebuilt on the first ruby (a stale cache): %s, want stale", got)
	}

	records, err := st.Verifications(t.Context(), "apps/shop")
	if err != nil || len(records) != 1 {
		t.Fatalf("stored: %+v, %v", records, err)
	}
	history, err := st.UpstreamHistory(t.Context(), ruby)
	if err != nil || len(history) != 2 {
		t.Fatalf("ruby's history: %+v, %v; want its two images", history, err)
	}
	rows := verify.Freshness(records, map[string][]verify.Seen{ruby: history})
	if len(rows) != 1 || rows[0].State != verify.StateStale || !rows[0].StaleSince.Equal(moved) || rows[0].Upstreams[0].BuiltOn != first {
		t.Errorf("freshness %+v, want shop stale since %s, built on %s", rows, moved, first)
	}
}

func check(t *testing.T, c *verify.Checker, project string, images []verify.Image, platforms []deps.Platform) verify.State {
	t.Helper()
	rs, err := c.Check(t.Context(), project, images, platforms)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(images)*len(platforms) {
		t.Fatalf("%s: %d results", project, len(rs))
	}
	return rs[0].Result.State
}
