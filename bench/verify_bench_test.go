package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// BenchmarkVerificationCost measures what verifying images costs a chain
// base → mid → app whose simulated pipelines push real images (OCI, with
// buildah's base annotation) to a real registry (Debian's docker-registry
// on 127.0.0.1), which depsd reads through a proxy adding 20 ms to every
// request (slowRegistry: a registry across a network). Two daemons run
// side by side on one fake GitLab, each over its own copy of the chain:
// one at the default settings (images.verify: enforce), one with
// images.verify: off; their rounds alternate, so that the machine's noise
// hits both alike. Each round succeeds base (the chain's root: its own
// images are verified beside the chain, report only), waits for mid's
// pipeline and for the root's verification to be done (a real mid's
// pipeline takes minutes), succeeds mid and times, from mid's success
// webhook to app's create request, the critical path: under enforce app
// waits for mid's verdict. Reported: p50 and p99 of both, the added
// latency (the difference of the means), and the registry requests made
// in that window (mid's verification: one image, one platform; goal ≤ 3:
// the image's tag and config, the upstream's tag, its config cached since
// the root's verification), and over the whole round per image verified.
// The floor of the added latency: 3 × 20 ms = 60 ms if the reads are made
// one after the other; 40 ms as verify makes them (the upstream's tag
// read beside the image's tag, then the image's config).
//
// Then the registry hangs (the proxy answers nothing): a third daemon,
// with images.timeout of hangTimeout instead of 30 s so the run stays
// short, runs rounds where mid succeeds right after it was created (its
// root's verification, hanging too, still in flight). The critical path
// must be about the timeout, and the chain go on with mid unknown.
func BenchmarkVerificationCost(b *testing.B) {
	const (
		latency     = 20 * time.Millisecond
		rounds      = 30 // per mode
		hangRounds  = 2
		hangTimeout = 2 * time.Second
	)
	for b.Loop() {
		b.StopTimer()
		regAddr := registrytest.Start(b)
		proxy := newSlowRegistry(b, regAddr, latency)
		srv, clk := newFake(gitlabtest.Options{Token: "bench", RegistryHost: proxy.Addr})
		groups := []string{"enforce", "off", "hang"}
		for _, g := range groups {
			seedImageChain(b, srv, g, regAddr, proxy.Addr)
		}
		def := config.Defaults().Images
		daemons := map[string]*served{}
		for _, g := range groups {
			daemons[g] = serveWith(b, srv, clk, []string{g}, chain.Full, func(c *config.Config) {
				c.Images = def // the defaults: verify enforce, timeout 30 s
				// The registry (behind its slow proxy) is on 127.0.0.1,
				// over plain HTTP: listed, as an operator would.
				c.Images.InsecureRegistries = []string{proxy.Addr, regAddr}
				switch g {
				case "off":
					c.Images.Verify = config.VerifyOff
				case "hang":
					c.Images.Timeout = hangTimeout
				}
			})
		}
		b.StartTimer()
		var on, off, before, reading, after []time.Duration
		var windowReqs, roundReqs []int
		counts0 := proxy.Counts()
		for i := range 2 * rounds {
			g := []string{"enforce", "off"}[i%2]
			r0 := proxy.Requests()
			res := imageRound(b, srv, daemons[g], proxy, g, i/2, true)
			if g == "off" {
				off = append(off, res.lat)
				if res.reqs != 0 {
					b.Fatalf("round %d: %d registry requests with images.verify: off", i, res.reqs)
				}
				continue
			}
			on = append(on, res.lat)
			before, reading, after = append(before, res.before), append(reading, res.registry), append(after, res.after)
			windowReqs = append(windowReqs, res.reqs)
			// base's and mid's images, one platform (app's image is
			// published nowhere depsd knows: no downstream names it).
			roundReqs = append(roundReqs, proxy.Requests()-r0)
		}
		counts := proxy.Counts()
		proxy.SetHang(true)
		var hang []time.Duration
		for i := range hangRounds {
			hang = append(hang, imageRound(b, srv, daemons["hang"], proxy, "hang", i, false).lat)
		}
		b.StopTimer()
		checkUnknown(b, daemons["hang"], "hang/mid")

		meanOn, meanOff := mean(on), mean(off)
		added := meanOn - meanOff
		slices.Sort(on)
		slices.Sort(off)
		slices.Sort(hang)
		perImage := float64(sum(windowReqs)) / float64(len(windowReqs))
		perImageRound := float64(sum(roundReqs)) / float64(2*len(roundReqs))
		b.ReportMetric(ms(percentile(on, 0.50)), "enforce-p50-ms")
		b.ReportMetric(ms(percentile(on, 0.99)), "enforce-p99-ms")
		b.ReportMetric(ms(percentile(off, 0.50)), "off-p50-ms")
		b.ReportMetric(ms(percentile(off, 0.99)), "off-p99-ms")
		b.ReportMetric(ms(added), "added-ms")
		b.ReportMetric(ms(mean(before)), "before-registry-ms")
		b.ReportMetric(ms(mean(reading)), "registry-ms")
		b.ReportMetric(ms(mean(after)), "after-registry-ms")
		b.ReportMetric(perImage, "requests/image")
		b.ReportMetric(float64(slices.Max(windowReqs)), "max-requests/image")
		b.ReportMetric(perImageRound, "round-requests/image")
		b.ReportMetric(ms(hang[len(hang)-1]), "hang-ms")
		b.ReportMetric(ms(hangTimeout), "timeout-ms")
		var kinds []string
		for _, k := range []string{"ping", "manifest", "blob", "other"} {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, counts[k]-counts0[k]))
		}
		b.Logf("verification at %s registry latency (%s store, %d rounds each, alternating): success → downstream create "+
			"p50 %.1f ms with images.verify: enforce (default), %.1f ms with off; p99 %.1f ms and %.1f ms; added %.1f ms per member "+
			"(mean), floor 40 ms (2 round trips: the image's tag and its upstream's at once, then the image's config; 60 ms if the 3 "+
			"were sequential); registry requests per image and platform on the critical path %.2f (max %d), goal ≤ 3; over whole "+
			"rounds %.2f per image (%s); the path under enforce: %.1f ms to the first registry request, %.1f ms reading, %.1f ms "+
			"from the last answer to the create (means)",
			latency, storeKind(), rounds, ms(percentile(on, 0.50)), ms(percentile(off, 0.50)), ms(percentile(on, 0.99)),
			ms(percentile(off, 0.99)), ms(added), perImage, slices.Max(windowReqs), perImageRound, strings.Join(kinds, ", "),
			ms(mean(before)), ms(mean(reading)), ms(mean(after)))
		b.Logf("registry hanging: success → downstream create %.0f ms at most over %d rounds with images.timeout %s "+
			"(goal: about the timeout, the downstream created with the member unknown)",
			ms(hang[len(hang)-1]), hangRounds, hangTimeout)
		for _, g := range groups {
			daemons[g].halt(b)
		}
		srv.Close()
		b.StartTimer()
	}
}

// seedImageChain adds group/base (FROM scratch), group/mid FROM base and
// group/app FROM mid, named in the Containerfiles by the registry depsd
// is told of (through, the proxy), and has their simulated pipelines push
// to the registry itself (direct: the push is the job's, not depsd's, and
// is not what is measured) an image built on the upstream's current
// image, annotated as buildah does.
func seedImageChain(b *testing.B, srv *gitlabtest.Server, group, direct, through string) {
	b.Helper()
	ref := func(host, project string) string { return host + "/" + group + "/" + project + ":latest" }
	for _, p := range []struct{ name, from string }{{"base", ""}, {"mid", "base"}, {"app", "mid"}} {
		cf, im := "FROM scratch\n", gitlabtest.Images{Refs: []string{ref(direct, p.name)}}
		if p.from != "" {
			cf = "FROM " + ref(through, p.from) + "\n"
			im.From, im.Annotate = ref(direct, p.from), true
		}
		path := group + "/" + p.name
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": cf}}); err != nil {
			b.Fatal(err)
		}
		if err := srv.SetImages(path, im); err != nil {
			b.Fatal(err)
		}
	}
}

// imageRound runs one chain of group: base succeeds, then mid once it was
// created (after the root's verification, when settled), and measures the
// time from mid's success to app's create request and the registry
// requests made meanwhile; it returns once the chain finished and every
// verification was applied. n is the number of rounds of group before.
func imageRound(b *testing.B, srv *gitlabtest.Server, s *served, proxy *slowRegistry, group string, n int, settled bool) roundResult {
	b.Helper()
	id, err := srv.RunPipeline(group+"/base", "", "push")
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.SetPipelineStatus(id, "success"); err != nil {
		b.Fatal(err)
	}
	mid := waitCreated(b, srv, group+"/mid", n)
	if settled {
		waitVerified(b, s)
	}
	r0 := proxy.Requests()
	if err := srv.SetPipelineStatus(mid.ID, "success"); err != nil {
		b.Fatal(err)
	}
	// The fake pushed mid's image, set the success and queued its webhook:
	// the webhook is sent from here on.
	t0 := time.Now()
	app := waitCreated(b, srv, group+"/app", n)
	res := roundResult{lat: app.Requested.Sub(t0), reqs: proxy.Requests() - r0}
	if spans := proxy.Spans(r0)[:res.reqs]; len(spans) > 0 {
		first, last := spans[0].Arrived, spans[0].Answered
		for _, sp := range spans {
			if sp.Answered.After(last) {
				last = sp.Answered
			}
		}
		res.before, res.registry, res.after = first.Sub(t0), last.Sub(first), app.Requested.Sub(last)
	}
	if err := srv.SetPipelineStatus(app.ID, "success"); err != nil {
		b.Fatal(err)
	}
	waitFinished(b, s)
	if failures := srv.PublishFailures(); len(failures) > 0 {
		b.Fatalf("a pipeline failed to push: %v", failures)
	}
	return res
}

// roundResult is what imageRound measured: the critical path (lat), the
// registry requests made on it, and the path cut in three: from the
// success to the first request (before), from there to the last answer
// (registry), and from there to the create (after).
type roundResult struct {
	lat                     time.Duration
	reqs                    int
	before, registry, after time.Duration
}

// waitCreated waits for the n+1st pipeline of project and returns it.
func waitCreated(b *testing.B, srv *gitlabtest.Server, project string, n int) gitlabtest.Pipeline {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if ps := srv.Pipelines(project); len(ps) > n {
			return ps[n]
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s was not triggered (%d pipelines)", project, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitVerified waits until no verification is queued.
func waitVerified(b *testing.B, s *served) {
	b.Helper()
	waitStats(b, s, "verifications", func(st chain.Stats) bool { return st.VerifyQueued == 0 })
}

// waitFinished waits until no chain is active and no verification is
// queued.
func waitFinished(b *testing.B, s *served) {
	b.Helper()
	waitStats(b, s, "chains and verifications", func(st chain.Stats) bool {
		return st.ActiveChains == 0 && st.VerifyQueued == 0 && st.PendingActions == 0
	})
}

func waitStats(b *testing.B, s *served, what string, done func(chain.Stats) bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := s.d.Engine().Stats(context.Background())
		if err == nil && done(st) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not settle: %+v, %v", what, st, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkUnknown fails b unless the last chain's member project was
// verified unknown (the registry did not answer in time) and the chain
// finished.
func checkUnknown(b *testing.B, s *served, project string) {
	b.Helper()
	views, err := s.d.Engine().Chains(context.Background(), chain.Filter{Project: project, Limit: 1})
	if err != nil || len(views) == 0 {
		b.Fatalf("chains of %s: %v", project, err)
	}
	v := views[0]
	for _, m := range v.Members {
		if m.Project == project && (m.Verified != chain.ImageUnknown || v.State != chain.Finished) {
			b.Fatalf("chain %d %s, %s %s verified %q (%s): want finished, unknown", v.ID, v.State, project, m.State, m.Verified, m.VerifyDetail)
		}
		if m.Project == project {
			b.Logf("registry hanging: %s %s, verified %s: %s", project, m.State, m.Verified, m.VerifyDetail)
		}
	}
}

// halt stops the daemon, leaving the fake GitLab running (serve's stop
// closes both).
func (s *served) halt(b *testing.B) {
	s.cancel()
	if err := <-s.done; err != nil {
		b.Error(err)
	}
}

func mean(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(max(1, len(ds)))
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}
