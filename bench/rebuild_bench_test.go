package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// BenchmarkRebuild2000 rebuilds one base image of the 2,000-project
// instance (every request to the fake GitLab takes 20 ms, every pipeline
// 100 ms) with the daemon at its default settings, and reports how long
// the whole chain takes, how many pipelines it created (exactly one per
// affected project), and two floors: floor-s, the pipeline time of every
// level plus the create requests × latency ÷ requests in flight, and
// rate-floor-s, the create requests at the default 2,000 requests a
// minute plus the pipeline time of every level.
func BenchmarkRebuild2000(b *testing.B) {
	rebuild(b, func(srv *gitlabtest.Server) { seedInstance(b, srv, 2000) }, "images/base-0")
}

// BenchmarkRebuildBase2000 is issue 10's goal 4: a base with 1,999 projects
// downstream in 4 levels (1 base, 20 runtimes, 200 images, 1,779 apps),
// 20 ms per request, 100 ms pipelines, default settings. Goal: within 2×
// of floor-s (5.4 s); at the default rate limit the creates alone take
// 60 s (rate-floor-s).
func BenchmarkRebuildBase2000(b *testing.B) {
	rebuild(b, func(srv *gitlabtest.Server) { seedBase(b, srv, 20, 200, 1779) }, "images/base")
}

// BenchmarkRebuildBase10000 is issue 30's goal 3: a base with 10,000
// projects downstream in 5 levels (20, 200, 1,000, 2,000, 6,780), 20 ms
// per request, 100 ms pipelines, default settings (creates at 2,000 a
// minute). Goal: within 1.1× of rate-floor-s (the 10,000 creates at the
// default 2,000 a minute, 300 s, plus a pipeline's 0.1 s per level: the
// creates of a level are due only once the level above succeeded), on
// SQLite and on PostgreSQL (DEPSD_BENCH_STORE=postgres), with no request
// but creates while creates are due (other-requests-during-creates: the
// requests of any other endpoint that reached GitLab between the first
// create and the last). DEPSD_BENCH_SCALE=0.1 runs it at a tenth of the
// size (each level a tenth) to try it out.
func BenchmarkRebuildBase10000(b *testing.B) {
	levels := []int{20, 200, 1000, 2000, 6780}
	for i := range levels {
		levels[i] = scaled(b, levels[i])
	}
	rebuild(b, func(srv *gitlabtest.Server) { seedBase(b, srv, levels...) }, "images/base")
}

// BenchmarkRebuildBase10000Refs is BenchmarkRebuildBase10000 with one
// extra followed branch on 10 % of the projects (issue 36): every project
// of each level whose index ends in 3 has a bookworm branch with a
// Containerfile of its own, FROM the same upstream as its default
// branch's, and `refs:` follows it. The graph has 11,000 nodes (at full
// size), all downstream of the base, so the chain creates 11,000
// pipelines, a tenth of them on bookworm (rate-floor-s: 330 s at the
// default 2,000 creates a minute). DEPSD_BENCH_SCALE shrinks it as it
// does BenchmarkRebuildBase10000.
func BenchmarkRebuildBase10000Refs(b *testing.B) {
	levels := []int{20, 200, 1000, 2000, 6780}
	for i := range levels {
		levels[i] = scaled(b, levels[i])
	}
	rules := deps.RefRules{{Projects: []string{"*/l*-*3"}, Branches: []string{refsBranch}}}
	rebuildWith(b, func(srv *gitlabtest.Server) {
		seedBase(b, srv, levels...)
		if n := seedRefs(b, srv, rules); n == 0 {
			b.Fatal("no project with a followed branch")
		}
	}, "images/base", func(cfg *config.Config) {
		cfg.Refs = []config.Refs{{Projects: rules[0].Projects, Branches: rules[0].Branches}}
	})
}

// seedBase seeds one base, and below it levels of projects each building
// FROM one project of the level above.
func seedBase(b *testing.B, srv *gitlabtest.Server, levels ...int) {
	b.Helper()
	add := func(path, cf string) {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": cf}}); err != nil {
			b.Fatal(err)
		}
	}
	add("images/base", "FROM debian:bookworm\n")
	above := []string{"images/base"}
	for l, n := range levels {
		var here []string
		for i := range n {
			group := "images"
			if l == len(levels)-1 {
				group = "apps"
			}
			p := fmt.Sprintf("%s/l%d-%d", group, l+1, i)
			add(p, fmt.Sprintf("FROM registry.example.com/%s\n", above[i%len(above)]))
			here = append(here, p)
		}
		above = here
	}
}

func rebuild(b *testing.B, seed func(*gitlabtest.Server), root string) {
	rebuildWith(b, seed, root, nil)
}

// rebuildWith is rebuild with configure changing the daemon's
// configuration (serveWith).
func rebuildWith(b *testing.B, seed func(*gitlabtest.Server), root string, configure func(*config.Config)) {
	for b.Loop() {
		b.StopTimer()
		const latency, pipeline = 20 * time.Millisecond, 100 * time.Millisecond
		var arrivals requestLog
		srv, clk := newFake(gitlabtest.Options{Token: "bench", OnRequest: arrivals.add,
			Pipelines: gitlabtest.Behavior{Duration: pipeline, Outcome: "success"}})
		seed(srv)
		s := serveWith(b, srv, clk, []string{"images", "apps"}, chain.Full, configure)
		srv.SetLatency(latency)
		ctx := context.Background()
		graph, err := s.d.Graph(ctx)
		if err != nil {
			b.Fatal(err)
		}
		affected := len(graph.Affected(root))
		levels := len(graph.Waves(root))
		b.ReportMetric(float64(len(graph.Projects())), "nodes")
		// Long enough for the creates at the rate limit, three times over.
		timeout := max(5*time.Minute, 3*time.Duration(affected+1)*time.Minute/time.Duration(max(s.cfg.GitLab.RequestsPerMinute, 1)))
		b.StartTimer()

		arrivals.start()
		before := srv.RequestCounts()
		start := time.Now()
		id, err := s.d.Engine().Rebuild(ctx, root, chain.Reason{Kind: chain.ReasonRebuild})
		if err != nil {
			b.Fatal(err)
		}
		// Wait cheaply until every create has reached the fake (a count
		// in memory), then for the chain to end: each look at the chain
		// reads its 2,000 members, which loads the machine it measures
		// (12 % of the CPU at 4 looks a second). The duration is the
		// chain's own, start to end as depsd recorded it, so the looks'
		// spacing does not round it.
		const createPath = "POST /projects/:id/pipeline"
		for srv.RequestCounts()[createPath]-before[createPath] < int64(affected+1) {
			if time.Since(start) > timeout {
				b.Fatalf("%d pipelines created after %s, want %d", srv.RequestCounts()[createPath]-before[createPath], timeout, affected+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var view chain.ChainView
		for {
			view, err = s.d.Engine().Chain(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if view.State != chain.Running {
				break
			}
			if time.Since(start) > timeout {
				b.Fatalf("chain still running after %s", timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if view.Ended == nil {
			b.Fatalf("chain %s without an end time", view.State)
		}
		took := view.Ended.Sub(start)
		b.StopTimer()
		// Every GitLab request depsd made during the chain counts against
		// the rate limit, not only the creates.
		var requests int64
		var byEndpoint []string
		for ep, n := range srv.RequestCounts() {
			if d := n - before[ep]; d > 0 {
				requests += d
				byEndpoint = append(byEndpoint, fmt.Sprintf("%s: %d", ep, d))
			}
		}
		slices.Sort(byEndpoint)
		b.ReportMetric(float64(requests), "requests")
		b.Logf("GitLab requests during the chain: %d (%s)", requests, strings.Join(byEndpoint, ", "))
		others, othersBy := arrivals.whileDue(createPath, dueIntervals(srv, graph, root, start), finishes(srv))
		b.ReportMetric(float64(others), "other-requests-while-creates-due")
		b.Logf("requests other than creates while a create was due: %d, goal 0 (%s)", others, strings.Join(othersBy, ", "))
		created, onBranches := 0, 0
		var requested []time.Time
		for _, p := range srv.Projects() {
			for _, pl := range srv.Pipelines(p) {
				if pl.Source == "api" {
					created++
					requested = append(requested, pl.Requested)
					if graph.Has(p + "@" + pl.Ref) {
						onBranches++
					}
				}
			}
		}
		if branchNodes := len(graph.Projects()) - len(srv.Projects()); onBranches != branchNodes {
			b.Fatalf("%d pipelines on followed branches, want one for each of the %d branch nodes", onBranches, branchNodes)
		}
		if onBranches > 0 {
			b.ReportMetric(float64(onBranches), "pipelines-on-followed-branches")
		}
		// The longest time without a create: a level's pipelines (0.1 s)
		// at most, unless something stalled.
		slices.SortFunc(requested, time.Time.Compare)
		var gap time.Duration
		var gapAt int
		for i := 1; i < len(requested); i++ {
			if d := requested[i].Sub(requested[i-1]); d > gap {
				gap, gapAt = d, i
			}
		}
		b.ReportMetric(gap.Seconds(), "max-create-gap-s")
		b.Logf("longest time without a create: %.2f s, before create %d of %d", gap.Seconds(), gapAt+1, len(requested))
		if view.State != chain.Finished || created != affected+1 {
			b.Fatalf("chain %s, %d pipelines for %d affected projects + the root", view.State, created, affected)
		}
		b.ReportMetric(took.Seconds(), "chain-s")
		b.ReportMetric(float64(created), "pipelines")
		b.ReportMetric(float64(affected), "affected")
		creates := float64(created)
		levelTime := float64(levels) * pipeline.Seconds()
		floor := levelTime + creates*latency.Seconds()/float64(s.cfg.GitLab.Concurrency)
		rateFloor := floor // no rate limit (DEPSD_BENCH_REQUESTS_PER_MINUTE=-1)
		if rpm := s.cfg.GitLab.RequestsPerMinute; rpm > 0 {
			rateFloor = levelTime + creates*60/float64(rpm)
		}
		b.ReportMetric(floor, "floor-s")
		b.ReportMetric(rateFloor, "rate-floor-s")
		b.ReportMetric(took.Seconds()/rateFloor, "rate-floor-ratio")
		b.Logf("rebuild of %s (%s store, %d affected, %d levels): %.1f s; floor %.1f s (%.1f× now); floor at %d requests/min %.1f s (%.2f× now; issue 30's goal at 10,000: ≤ 1.1×)",
			root, storeKind(), affected, levels, took.Seconds(), floor, took.Seconds()/floor,
			s.cfg.GitLab.RequestsPerMinute, rateFloor, took.Seconds()/rateFloor)
		srv.SetLatency(0)
		s.stop(b)
		b.StartTimer()
	}
}

// requestLog records when each request reached the fake GitLab, from
// start on.
type requestLog struct {
	mu      sync.Mutex
	on      bool
	entries []loggedRequest
}

type loggedRequest struct {
	endpoint string
	at       time.Time
}

func (l *requestLog) add(endpoint string) {
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.entries = append(l.entries, loggedRequest{endpoint, at})
	}
}

func (l *requestLog) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on, l.entries = true, nil
}

// whileDue counts the requests to endpoints other than main that arrived
// within one of the intervals, and names them by endpoint, each with how
// long after the last pipeline finished before it (finished, sorted) it
// arrived: a request within the time a webhook takes to reach depsd went
// out before depsd could know that a create was due.
func (l *requestLog) whileDue(main string, due []interval, finished []time.Time) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, by := 0, map[string][]string{}
	for _, e := range l.entries {
		if e.endpoint == main {
			continue
		}
		// due is sorted by start and merged: the interval starting at e,
		// or else the last one starting before it, is the only one that
		// can hold it.
		i, at := slices.BinarySearchFunc(due, e.at, func(iv interval, t time.Time) int { return iv.from.Compare(t) })
		if at || (i > 0 && e.at.Before(due[i-1].to)) {
			n++
			after := "before any pipeline finished"
			if j, _ := slices.BinarySearchFunc(finished, e.at, time.Time.Compare); j > 0 {
				after = fmt.Sprintf("%.0f ms after a pipeline finished", float64(e.at.Sub(finished[j-1]).Microseconds())/1000)
			}
			by[e.endpoint] = append(by[e.endpoint], after)
		}
	}
	var out []string
	for ep, lags := range by {
		out = append(out, fmt.Sprintf("%s: %d (%s)", ep, len(lags), strings.Join(lags, "; ")))
	}
	slices.Sort(out)
	return n, out
}

type interval struct{ from, to time.Time }

// finishes are the times the pipelines depsd created finished, sorted.
func finishes(srv *gitlabtest.Server) []time.Time {
	var out []time.Time
	for _, p := range srv.Projects() {
		for _, pl := range srv.Pipelines(p) {
			if pl.Source == "api" && !pl.FinishedAt.IsZero() {
				out = append(out, pl.FinishedAt)
			}
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// dueIntervals are the times at which a create of the chain was due: for
// each pipeline depsd created (its node's), from when its upstream's pipeline finished
// (the root's: from start) until the create reached GitLab; sorted and
// merged. (The upstream's webhook reaches depsd a little after its
// pipeline finished, so the intervals are if anything too wide.)
func dueIntervals(srv *gitlabtest.Server, graph interface {
	Upstream(string) []string
	Has(string) bool
}, root string, start time.Time) []interval {
	finished := map[string]time.Time{}
	requested := map[string]time.Time{}
	for _, p := range srv.Projects() {
		for _, pl := range srv.Pipelines(p) {
			if pl.Source == "api" {
				// A pipeline on a followed branch is its node's.
				node := p
				if graph.Has(p + "@" + pl.Ref) {
					node = p + "@" + pl.Ref
				}
				finished[node], requested[node] = pl.FinishedAt, pl.Requested
			}
		}
	}
	var ivs []interval
	for p, req := range requested {
		from := start
		if p != root {
			from = time.Time{}
			for _, u := range graph.Upstream(p) {
				if f, ok := finished[u]; ok && f.After(from) {
					from = f
				}
			}
		}
		if !from.IsZero() && from.Before(req) {
			ivs = append(ivs, interval{from, req})
		}
	}
	slices.SortFunc(ivs, func(a, b interval) int { return a.from.Compare(b.from) })
	var merged []interval
	for _, iv := range ivs {
		if n := len(merged); n > 0 && !iv.from.After(merged[n-1].to) {
			if iv.to.After(merged[n-1].to) {
				merged[n-1].to = iv.to
			}
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}
