package chain_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// BenchmarkApplyEvent applies one pipeline event (the running chain's base
// pipeline waiting for a manual job, then running, alternately: the member
// changes each time, so the chain is settled and saved) to a chain of 5
// members and to one of 2,000, through the engine and the store (SQLite by
// default, DEPSD_TEST_STORE=postgres).
// Goal (issue 10): the 2,000-member event costs at most 2× the 5-member one.
// Besides the time per event it reports the process's CPU time per event
// (cpu-ns/op), which a busy machine disturbs far less than the wall time.
func BenchmarkApplyEvent(b *testing.B) {
	perOp, cpuPerOp := map[int]time.Duration{}, map[int]time.Duration{}
	for _, n := range []int{5, 2000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			ctx := b.Context()
			s, err := store.Open(ctx, storetest.State(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			projects := []scan.Project{{ID: 1, Path: "g/base", DefaultBranch: "main"}}
			for i := 1; i < n; i++ {
				projects = append(projects, scan.Project{ID: int64(i + 1), Path: fmt.Sprintf("g/app%d", i), DefaultBranch: "main",
					Dependencies: []deps.Dependency{{Kind: deps.KindGitLabDeps, Ref: "g/base", Project: "g/base"}}})
			}
			if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
				b.Fatal(err)
			}
			clk := &clock{t: t0}
			gl := &fakeGitLab{now: clk.Now}
			// The daemon hands the engine its graph from memory.
			g, err := s.Graph(ctx)
			if err != nil {
				b.Fatal(err)
			}
			graph := func(context.Context) (*deps.Graph, error) { return g, nil }
			en, err := chain.New(chain.Config{Store: s, GitLab: gl, Graph: graph, Mode: chain.Full, Now: clk.Now})
			if err != nil {
				b.Fatal(err)
			}
			id, err := en.Rebuild(ctx, "g/base", chain.Reason{Kind: chain.ReasonRebuild, Detail: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := en.SendPending(ctx); err != nil {
				b.Fatal(err)
			}
			v, err := en.Chain(ctx, id)
			if err != nil || len(v.Members) != n {
				b.Fatalf("chain of %d members, want %d (%v)", len(v.Members), n, err)
			}
			p := gl.created(1)[0]
			statuses := []string{"manual", "running"}
			b.ResetTimer()
			cpu0 := processCPU(b)
			i := 0
			for b.Loop() {
				ev := chain.PipelineEvent{ProjectID: 1, Project: "g/base", PipelineID: p.ID, Status: statuses[i%2],
					Ref: "main", Source: "api", Variables: p.vars, URL: p.WebURL, At: clk.Now()}
				if _, err := en.ApplyPipelineEvent(ctx, ev); err != nil {
					b.Fatal(err)
				}
				i++
			}
			perOp[n] = b.Elapsed() / time.Duration(max(b.N, 1))
			cpuPerOp[n] = (processCPU(b) - cpu0) / time.Duration(max(b.N, 1))
			b.ReportMetric(float64(cpuPerOp[n].Nanoseconds()), "cpu-ns/op")
			if n == 2000 && perOp[5] > 0 {
				b.Logf("apply one event: %s for 2,000 members, %s for 5: %.1f× (CPU time %s vs %s: %.1f×), goal ≤ 2×",
					perOp[2000], perOp[5], float64(perOp[2000])/float64(perOp[5]),
					cpuPerOp[2000], cpuPerOp[5], float64(cpuPerOp[2000])/float64(cpuPerOp[5]))
			}
		})
	}
}

// processCPU returns the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
