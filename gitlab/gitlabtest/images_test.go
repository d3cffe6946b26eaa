package gitlabtest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/verify"
)

// Simulated pipelines push their project's images to a real registry on
// success, built on their upstream's current image: verification finds
// them fresh, stale when a pipeline is told to build on an earlier base,
// and unchanged when it is told to push nothing.
func TestPipelinesPublishImages(t *testing.T) {
	host := registrytest.Start(t)
	s := New(Options{RegistryHost: host, Pipelines: Behavior{Duration: time.Millisecond}})
	defer s.Close()
	for _, p := range []string{"base/ruby", "apps/shop", "apps/cli", "apps/broken"} {
		if _, err := s.AddProject(Project{Path: p, Files: map[string]string{"Containerfile": "FROM scratch\n"}}); err != nil {
			t.Fatal(err)
		}
	}
	both := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	ruby := host + "/base/ruby:latest"
	for path, im := range map[string]Images{
		"base/ruby":   {Platforms: both},
		"apps/shop":   {From: ruby, Platforms: both, Annotate: true},
		"apps/cli":    {From: ruby, Refs: []string{host + "/apps/cli:1", host + "/apps/cli:latest"}},
		"apps/broken": {From: host + "/base/none:1"},
	} {
		if err := s.SetImages(path, im); err != nil {
			t.Fatal(err)
		}
	}
	run := func(project string) (Pipeline, []Published) {
		t.Helper()
		before := len(s.PublishedImages())
		id, err := s.RunPipeline(project, "", "push")
		if err != nil {
			t.Fatal(err)
		}
		pl, err := s.WaitPipeline(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return pl, s.PublishedImages()[before:]
	}
	_, first := run("base/ruby")
	_, second := run("base/ruby")
	if len(first) != 1 || len(second) != 1 || first[0].Digest == second[0].Digest || first[0].Ref != ruby {
		t.Fatalf("base pushes %+v then %+v: want one new image under %s each time", first, second, ruby)
	}
	old, cur := first[0].Digest, second[0].Digest

	v := verify.New(registry.New(registry.Options{Insecure: []string{host}}), verify.Options{})
	up := []verify.Upstream{{Image: ruby, Current: cur, Earlier: []string{old}}}
	check := func(ref string, p deps.Platform, state verify.State, by, builtOn string) {
		t.Helper()
		res := v.Verify(t.Context(), verify.Request{Image: ref, Platform: p, Upstreams: up})
		got := res.Upstreams[0]
		if got.State != state || got.By != by || got.BuiltOn != builtOn {
			t.Errorf("%s %s: %s by %q on %s (%s); want %s by %q on %s", ref, p, got.State, got.By, got.BuiltOn, got.Detail, state, by, builtOn)
		}
	}
	amd64, arm64 := deps.Platform{OS: "linux", Architecture: "amd64"}, deps.Platform{OS: "linux", Architecture: "arm64"}

	pl, pushed := run("apps/shop")
	if pl.Status != "success" || len(pushed) != 1 || pushed[0].BaseDigest != cur {
		t.Fatalf("shop: %s, pushed %+v; want success and one image on %s", pl.Status, pushed, cur)
	}
	check(host+"/apps/shop:latest", amd64, verify.StateFresh, verify.ByAnnotation, cur)
	check(host+"/apps/shop:latest", arm64, verify.StateFresh, verify.ByAnnotation, cur)
	_, pushed = run("apps/cli")
	if len(pushed) != 2 || pushed[0].Digest != pushed[1].Digest {
		t.Fatalf("cli pushed %+v: want one image under its two tags", pushed)
	}
	check(host+"/apps/cli:1", amd64, verify.StateFresh, verify.ByLayers, cur)

	// Told to build on the earlier base: stale, by annotation and by layers.
	s.PlanPublish("apps/shop", PublishPlan{From: old})
	s.PlanPublish("apps/cli", PublishPlan{From: old})
	run("apps/shop")
	run("apps/cli")
	check(host+"/apps/shop:latest", arm64, verify.StateStale, verify.ByAnnotation, old)
	check(host+"/apps/cli:latest", amd64, verify.StateStale, verify.ByLayers, old)

	// Told to push nothing: the pipeline succeeds, the tag stays where it was.
	s.PlanPublish("apps/cli", PublishPlan{Nothing: true})
	pl, pushed = run("apps/cli")
	if pl.Status != "success" || len(pushed) != 0 {
		t.Errorf("cli with nothing to push: %s, pushed %+v", pl.Status, pushed)
	}
	check(host+"/apps/cli:latest", amd64, verify.StateStale, verify.ByLayers, old)

	// A base that cannot be read fails the pipeline, as a job would.
	pl, _ = run("apps/broken")
	if fails := s.PublishFailures(); pl.Status != "failed" || len(fails) != 1 || !strings.Contains(fails[0].Error(), "base/none:1") {
		t.Errorf("broken: %s, failures %v; want failed, naming the base", pl.Status, fails)
	}
}

// Simulated pipelines push what the build component pushes: a merge
// request pipeline only its candidate (mr-<iid>), a validation only its
// depsd_validate_tag (or nothing), built on the candidate that
// depsd_build_contexts names instead of the FROM's image; a build on a
// base BreakBuildOn names fails.
func TestPipelinesPushLikeTheBuildComponent(t *testing.T) {
	host := registrytest.Start(t)
	s := New(Options{RegistryHost: host, Pipelines: Behavior{Duration: time.Millisecond}})
	defer s.Close()
	base, ruby := host+"/infra/base:latest", host+"/lang/ruby:latest"
	for path, from := range map[string]string{"infra/base": "scratch", "lang/ruby": base} {
		if _, err := s.AddProject(Project{Path: path, Files: map[string]string{"Containerfile": "FROM " + from + "\n"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetImages("infra/base", Images{Refs: []string{base}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetImages("lang/ruby", Images{From: base, Annotate: true}); err != nil {
		t.Fatal(err)
	}
	wait := func(id int64) (Pipeline, []Published) {
		t.Helper()
		before := len(s.PublishedImages())
		pl, err := s.WaitPipeline(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		return pl, s.PublishedImages()[before:]
	}
	release, _ := wait(mustDo[int64](t)(s.RunPipeline("infra/base", "", "push")))
	if release.Status != "success" {
		t.Fatalf("base release: %s", release.Status)
	}
	if err := s.SetPipelineBehavior("infra/base", Behavior{Duration: time.Millisecond, OnMergeRequest: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBranch("infra/base", "slim"); err != nil {
		t.Fatal(err)
	}
	mustDo[string](t)(s.SetFileOn("infra/base", "slim", "Containerfile", "FROM scratch\nRUN rm -rf /usr/lib/ruby\n"))
	iid := mustDo[int64](t)(s.OpenMR("infra/base", "slim", "main", "Slim the base"))
	var mrPipeline int64
	for _, p := range s.Pipelines("infra/base") {
		if p.MergeRequestIID == iid {
			mrPipeline = p.ID
		}
	}
	pl, pushed := wait(mrPipeline)
	candidate := host + "/infra/base:mr-1"
	if pl.Status != "success" || pl.Source != "merge_request_event" || len(pushed) != 1 || pushed[0].Ref != candidate {
		t.Fatalf("merge request pipeline: %s %s, pushed %+v; want success pushing %s only", pl.Status, pl.Source, pushed, candidate)
	}
	cand := pushed[0].Digest

	contexts := base + "=docker-image://" + host + "/infra/base@" + cand
	code, body := postPipeline(t, s, "lang/ruby", `{"ref":"main","variables":[
		{"key":"DEPSD_VALIDATE","value":"1"},{"key":"DEPSD_BUILD_CONTEXTS","value":"`+contexts+`"},
		{"key":"DEPSD_VALIDATE_TAG","value":"depsd-validate-7"}]}`)
	if code != 201 {
		t.Fatalf("create validation: %d %s", code, body)
	}
	var created struct{ ID int64 }
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	pl, pushed = wait(created.ID)
	if pl.Status != "success" || len(pushed) != 1 || pushed[0].Ref != host+"/lang/ruby:depsd-validate-7" || pushed[0].BaseDigest != cand {
		t.Fatalf("validation: %s, pushed %+v; want success pushing :depsd-validate-7 built on the candidate %s", pl.Status, pushed, cand)
	}

	// By ARG, without a tag to push: builds, pushes nothing.
	code, body = postPipeline(t, s, "lang/ruby", `{"ref":"main","variables":[
		{"key":"DEPSD_VALIDATE","value":"1"},{"key":"DEPSD_BUILD_CONTEXTS","value":"BASE_IMAGE=docker-image://`+host+`/infra/base@`+cand+`"}]}`)
	if code != 201 || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("create validation: %d %s", code, body)
	}
	if pl, pushed = wait(created.ID); pl.Status != "success" || len(pushed) != 0 {
		t.Fatalf("validation without a tag: %s, pushed %+v; want success, nothing pushed", pl.Status, pushed)
	}

	s.BreakBuildOn("lang/ruby", cand)
	code, body = postPipeline(t, s, "lang/ruby", `{"ref":"main","variables":[
		{"key":"DEPSD_VALIDATE","value":"1"},{"key":"DEPSD_BUILD_CONTEXTS","value":"`+contexts+`"}]}`)
	if code != 201 || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("create validation: %d %s", code, body)
	}
	if pl, _ = wait(created.ID); pl.Status != "failed" {
		t.Fatalf("a build on a base it breaks on: %s, want failed", pl.Status)
	}
	// The release build, on the released base, still succeeds.
	if pl, pushed = wait(mustDo[int64](t)(s.RunPipeline("lang/ruby", "", "push"))); pl.Status != "success" || len(pushed) != 1 || pushed[0].Ref != ruby {
		t.Fatalf("ruby release: %s, pushed %+v", pl.Status, pushed)
	}
}
