package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/pgtest"
	"gitlab.com/depsd/depsd/verify"
)

// TestStaleImageRebuiltWithoutCacheAgainstTheRegistry runs the daemon
// against the fake GitLab whose pipelines push real images to a real
// registry (docker-registry): g/shop is built FROM g/ruby, g/web FROM
// g/shop. When ruby moves and shop's next build still uses the old ruby
// (a layer cache), depsd reads shop's image, finds it stale, rebuilds it
// once with DEPSD_NO_CACHE=1, and web is built only after shop's image is
// fresh. Built on the old ruby twice, shop ends stale and web is blocked,
// with the digests in the reason.
func TestStaleImageRebuiltWithoutCacheAgainstTheRegistry(t *testing.T) {
	host := registrytest.Start(t)
	ruby, shop := host+"/g/ruby:latest", host+"/g/shop:latest"
	srv := testGitLab(t, gitlabtest.Options{RegistryHost: host,
		Pipelines: gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}},
		map[string]string{"g/ruby": "FROM scratch\n", "g/shop": "FROM " + ruby + "\n", "g/web": "FROM " + shop + "\n"})
	var err error
	d, ctx := runVerifying(t, srv, map[string]gitlabtest.Images{
		"g/ruby": {Refs: []string{ruby}},
		"g/shop": {From: ruby, Annotate: true},
		"g/web":  {From: shop, Annotate: true},
	})
	// rebuildRuby starts a chain at g/ruby and returns it once it finished
	// or blocked.
	rebuildRuby := func() chain.ChainView {
		t.Helper()
		var id int64
		eventually(t, "the rebuild to be accepted", func() bool {
			id, err = d.Engine().Rebuild(ctx, "g/ruby", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
			return err == nil
		})
		var v chain.ChainView
		eventually(t, "the chain to finish or block", func() bool {
			v, err = d.Engine().Chain(ctx, id)
			return err == nil && v.State != chain.Running
		})
		return v
	}
	shopMember := func(v chain.ChainView) chain.MemberView {
		for _, m := range v.Members {
			if m.Project == "g/shop" {
				return m
			}
		}
		t.Fatalf("no g/shop in chain %d", v.ID)
		return chain.MemberView{}
	}

	// The first rebuild: everything fresh (ruby itself, FROM scratch,
	// cannot be judged), and ruby's digest is now known.
	first := rebuildRuby()
	if first.State != chain.Finished {
		t.Fatalf("first chain %s: %+v", first.State, first.Members)
	}
	old := srv.PublishedImages()[0].Digest
	if m := shopMember(first); m.Verified != chain.ImageFresh || m.Builds != 1 {
		t.Fatalf("g/shop in the first chain = %+v", m)
	}

	// ruby moves; shop's next build still uses the old ruby.
	srv.PlanPublish("g/shop", gitlabtest.PublishPlan{From: old})
	second := rebuildRuby()
	m := shopMember(second)
	if second.State != chain.Finished || m.Builds != 2 || !m.NoCache || m.Verified != chain.ImageFresh {
		t.Fatalf("second chain %s, g/shop %+v: want finished after one rebuild without cache", second.State, m)
	}
	shops := srv.Pipelines("g/shop")
	if len(shops) != 3 || shops[1].Variables[chain.VarNoCache] != "" || shops[2].Variables[chain.VarNoCache] != "1" {
		t.Errorf("g/shop pipelines %+v: want the third, and only it, without cache", shops)
	}
	webs := srv.Pipelines("g/web")
	if len(webs) != 2 || webs[1].CreatedAt.Before(shops[2].FinishedAt) {
		t.Errorf("g/web pipelines %+v: want its second after shop's rebuild finished at %v", webs, shops[2].FinishedAt)
	}
	records, err := d.store.Verifications(ctx, "g/shop")
	if err != nil || len(records) != 1 || records[0].Result.State != verify.StateFresh {
		t.Errorf("stored verification of g/shop = %+v, %v; want fresh", records, err)
	}

	// Twice on the old ruby: stale, web blocked.
	srv.PlanPublish("g/shop", gitlabtest.PublishPlan{From: old})
	srv.PlanPublish("g/shop", gitlabtest.PublishPlan{From: old})
	third := rebuildRuby()
	m = shopMember(third)
	if third.State != chain.Blocked || m.State != chain.Stale || m.Builds != 2 {
		t.Fatalf("third chain %s, g/shop %+v: want blocked, shop stale after two builds", third.State, m)
	}
	for _, w := range third.Members {
		if w.Project == "g/web" && (w.State != chain.MemberBlocked || !strings.HasPrefix(w.Why, "blocked: g/shop was built on "+ruby+" "+old[:len("sha256:")+12]+", not sha256:")) {
			t.Errorf("g/web = %s %q: want blocked by shop's stale base %s", w.State, w.Why, old)
		}
	}
	if n := len(srv.Pipelines("g/web")); n != 2 {
		t.Errorf("g/web built %d times, want 2: not on a stale shop", n)
	}
	var stale dto.Metric
	if err := d.metrics.verifications.WithLabelValues("stale").Write(&stale); err != nil || stale.GetCounter().GetValue() != 3 {
		got := stale.GetCounter().GetValue()
		t.Errorf("depsd_image_verifications_total{result=stale} = %v, want 3", got)
	}
	// What an operator is shown (depsd freshness, the API, the page): shop
	// stale since ruby moved away from its base, nothing running will
	// rebuild it (its chain is blocked), past a max age of 0 (the command
	// exits 1).
	rep, err := d.freshness(ctx, FreshnessQuery{Projects: []string{"g/shop"}})
	if err != nil || len(rep.Images) != 1 {
		t.Fatalf("freshness = %+v, %v", rep, err)
	}
	if r := rep.Images[0]; r.Project != "g/shop" || r.State != verify.StateStale || r.StaleSince.IsZero() || r.Fix == nil || r.Fix.Kind != verify.FixNone || rep.StaleBeyondMaxAge != 1 {
		t.Errorf("freshness row %+v (fix %+v), %d past max age 0; want g/shop stale with nothing to fix it, 1", r, r.Fix, rep.StaleBeyondMaxAge)
	}
}

// TestExternalBaseMovedIsReadFromTheRegistry: an upstream outside the
// scope (a base image no project builds) moves without depsd verifying
// it; its current image is what the registry says now, not the newest
// digest depsd recorded, so a build on its old image is stale, not fresh.
func TestExternalBaseMovedIsReadFromTheRegistry(t *testing.T) {
	host := registrytest.Start(t)
	ruby, shop := host+"/ext/ruby:3", host+"/g/shop:latest"
	old := registrytest.Push(t, ruby)
	srv := testGitLab(t, gitlabtest.Options{RegistryHost: host,
		Pipelines: gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}},
		map[string]string{"g/shop": "FROM " + ruby + "\n", "g/web": "FROM " + shop + "\n"})
	var err error
	d, ctx := runVerifying(t, srv, map[string]gitlabtest.Images{
		"g/shop": {From: ruby, Annotate: true},
		"g/web":  {From: shop, Annotate: true},
	})
	rebuildShop := func() chain.MemberView {
		t.Helper()
		var id int64
		eventually(t, "the rebuild to be accepted", func() bool {
			id, err = d.Engine().Rebuild(ctx, "g/shop", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
			return err == nil
		})
		var v chain.ChainView
		eventually(t, "the chain to finish or block", func() bool {
			v, err = d.Engine().Chain(ctx, id)
			return err == nil && v.State != chain.Running
		})
		for _, m := range v.Members {
			if m.Project == "g/shop" {
				return m
			}
		}
		t.Fatalf("no g/shop in chain %d", id)
		return chain.MemberView{}
	}
	if m := rebuildShop(); m.Verified != chain.ImageFresh || m.Builds != 1 {
		t.Fatalf("g/shop on ruby's first image = %+v, want fresh", m)
	}
	registrytest.Push(t, ruby) // ruby moves; depsd reads nothing of it yet
	srv.PlanPublish("g/shop", gitlabtest.PublishPlan{From: old})
	if m := rebuildShop(); m.Builds != 2 || !m.NoCache || m.Verified != chain.ImageFresh {
		t.Errorf("g/shop built on ruby's old image = %+v: want it found stale and rebuilt without cache", m)
	}
}

// TestMultiStageImageJudgedAgainstItsBuiltStage: g/shop's Containerfile
// has a builder stage FROM ext/golang and its built stage FROM g/ruby.
// Its image is judged against ruby alone, as the scan recorded the built
// stage's bases in the store: fresh. Judged against golang too (every
// FROM), it would be unknown, since nothing of golang is in it.
func TestMultiStageImageJudgedAgainstItsBuiltStage(t *testing.T) {
	host := registrytest.Start(t)
	golang, ruby, shop := host+"/ext/golang:1", host+"/g/ruby:latest", host+"/g/shop:latest"
	registrytest.Push(t, golang)
	srv := testGitLab(t, gitlabtest.Options{RegistryHost: host,
		Pipelines: gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}},
		map[string]string{
			"g/ruby": "FROM scratch\n",
			"g/shop": "FROM " + golang + " AS build\nRUN go build\nFROM " + ruby + "\nCOPY --from=build /app /app\n",
			"g/web":  "FROM " + shop + "\n",
		})
	var err error
	d, ctx := runVerifying(t, srv, map[string]gitlabtest.Images{
		"g/ruby": {Refs: []string{ruby}},
		"g/shop": {From: ruby, Annotate: true},
	})
	var id int64
	eventually(t, "the rebuild to be accepted", func() bool {
		id, err = d.Engine().Rebuild(ctx, "g/ruby", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
		return err == nil
	})
	var v chain.ChainView
	eventually(t, "the chain to finish or block", func() bool {
		v, err = d.Engine().Chain(ctx, id)
		return err == nil && v.State != chain.Running
	})
	var found bool
	for _, m := range v.Members {
		if m.Project != "g/shop" {
			continue
		}
		found = true
		if m.Verified != chain.ImageFresh || m.Builds != 1 {
			t.Errorf("g/shop = %+v (%s): want fresh after one build, judged against %s alone", m, m.VerifyDetail, ruby)
		}
	}
	if !found || v.State != chain.Finished {
		t.Fatalf("chain %s without g/shop: %+v", v.State, v.Members)
	}
	records, err := d.store.Verifications(ctx, "g/shop")
	if err != nil || len(records) != 1 {
		t.Fatalf("stored verifications of g/shop = %+v, %v", records, err)
	}
	if ups := records[0].Result.Upstreams; len(ups) != 1 || ups[0].Upstream != ruby {
		t.Errorf("g/shop judged against %+v, want %s alone", ups, ruby)
	}
}

// runVerifying gives srv's projects their images and runs the daemon
// against it with images.verify enforce until the test ends.
func runVerifying(t *testing.T, srv *gitlabtest.Server, images map[string]gitlabtest.Images) (*Daemon, context.Context) {
	t.Helper()
	for path, im := range images {
		if err := srv.SetImages(path, im); err != nil {
			t.Fatal(err)
		}
	}
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	cfg.Images.Verify = config.VerifyEnforce
	// The instance's registry is on 127.0.0.1, over plain HTTP: listed.
	cfg.Images.InsecureRegistries = []string{srv.RegistryHost()}
	return runDaemon(t, Options{Config: cfg, GitLab: gl,
		PollInterval: 50 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond})
}

// TestVerificationQueuedByAnotherReplicaWakesTheLeader: with replicas on
// PostgreSQL, a member's success that another replica applied is queued
// for verification there, and the leader, which alone verifies, starts on
// it at once (the queue's notification), not at its next poll of the
// queue (an hour here).
func TestVerificationQueuedByAnotherReplicaWakesTheLeader(t *testing.T) {
	host := registrytest.Start(t)
	srv := testGitLab(t, gitlabtest.Options{RegistryHost: host}, map[string]string{"g/ruby": "FROM scratch\n"})
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	cfg.Images.Verify = config.VerifyEnforce
	cfg.State = pgtest.Database(t)
	_, ctx := runDaemon(t, Options{Config: cfg, GitLab: gl, PollInterval: time.Hour})
	other, err := store.Open(ctx, cfg.State) // the replica that applied the success
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	info, _ := srv.Project("g/ruby")
	queued := func() int {
		var n int
		err := other.ViewChains(ctx, func(tx chain.Tx) error {
			tasks, err := tx.VerifyTasks(ctx, 10)
			n = len(tasks)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The first may meet the leader's first look at the queue; the
	// second waits for a wake-up.
	for _, pipeline := range []int64{101, 102} {
		err := other.UpdateChains(ctx, func(tx chain.Tx) error {
			return tx.QueueVerify(ctx, chain.VerifyTask{Project: "g/ruby", ProjectID: info.ID, PipelineID: pipeline, QueuedAt: time.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("the leader to verify pipeline %d's images", pipeline), func() bool { return queued() == 0 })
	}
}
