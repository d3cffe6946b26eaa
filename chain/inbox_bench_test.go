package chain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// BenchmarkInboxByKind applies batches of 64 recorded pipeline events of
// one kind through ProcessInbox, as the daemon's inbox does after a burst
// of webhooks, on the cheap path (cheap.go) and on the full path
// (SetFullPathOnly), through the store (SQLite by default,
// DEPSD_TEST_STORE=postgres). The kinds are those of issue 40's mix that
// no chain can use: a running pipeline of a project with nothing
// downstream, of one with dependents, a failed pipeline of one with
// dependents, a success of one with nothing downstream; and, for
// comparison, a success delivered a second time (a group hook's
// duplicate) of a pipeline that started a chain, which always takes the
// full path. It reports the process's CPU time per event (cpu-ns/event)
// spent in ProcessInbox, the recording excluded.
func BenchmarkInboxByKind(b *testing.B) {
	kinds := []struct {
		name, project, status string
	}{
		{"running-leaf", "g/leaf", "running"},
		{"running-root", "g/base", "running"},
		{"failed-root", "g/base", "failed"},
		{"success-leaf", "g/leaf", "success"},
		{"success-again", "g/base", "success"},
	}
	for _, k := range kinds {
		for _, path := range []string{"cheap", "full"} {
			b.Run(k.name+"/"+path, func(b *testing.B) {
				ctx := b.Context()
				s, err := store.Open(ctx, storetest.State(b))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				projects := []scan.Project{{ID: 1, Path: "g/base", DefaultBranch: "main"}, {ID: 2, Path: "g/leaf", DefaultBranch: "main"}}
				for i := range 20 {
					projects = append(projects, scan.Project{ID: int64(10 + i), Path: fmt.Sprintf("g/app%d", i), DefaultBranch: "main",
						Dependencies: []deps.Dependency{{Kind: deps.KindGitLabDeps, Ref: "g/base", Project: "g/base"}}})
				}
				if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
					b.Fatal(err)
				}
				g, err := s.Graph(ctx)
				if err != nil {
					b.Fatal(err)
				}
				clk := &clock{t: t0}
				en, err := chain.New(chain.Config{Store: s, GitLab: &fakeGitLab{now: clk.Now}, Mode: chain.Full, Now: clk.Now,
					Graph: func(context.Context) (*deps.Graph, error) { return g, nil }})
				if err != nil {
					b.Fatal(err)
				}
				if path == "full" {
					chain.SetFullPathOnly(en)
				}
				id := map[string]int64{"g/base": 1, "g/leaf": 2}[k.project]
				pipeline := int64(500)
				if k.name == "success-again" {
					// The first delivery starts a chain; the batches are
					// its duplicates.
					if _, err := en.ApplyPipelineEvent(ctx, chain.PipelineEvent{ProjectID: 1, Project: "g/base", PipelineID: pipeline,
						Status: "success", Ref: "main", Source: "push", At: t0}); err != nil {
						b.Fatal(err)
					}
				}
				const batch = 64
				seq := 0
				var cpu time.Duration
				events := 0
				for b.Loop() {
					b.StopTimer()
					evs := make([]chain.NewEvent, batch)
					for i := range evs {
						seq++
						p := pipeline
						if k.name != "success-again" {
							p = int64(1000 + seq)
						}
						ev := chain.PipelineEvent{ProjectID: id, Project: k.project, PipelineID: p, Status: k.status,
							Ref: "main", Source: "push", At: t0}
						evs[i] = chain.NewEvent{Key: fmt.Sprintf("k%d", seq), Event: chain.Event{Pipeline: &ev}}
					}
					if _, err := s.RecordEvents(ctx, evs); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					c0 := processCPU(b)
					n, err := en.ProcessInbox(ctx)
					cpu += processCPU(b) - c0
					if err != nil || n != batch {
						b.Fatalf("applied %d of %d: %v", n, batch, err)
					}
					events += n
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(events, 1)), "cpu-ns/event")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
