package chain_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

// randomDAG returns edges "pI>pJ" with I < J, so the graph is acyclic.
func randomDAG(r *rand.Rand, n int) []string {
	var edges []string
	for j := 1; j < n; j++ {
		for i := range j {
			if r.IntN(3) == 0 {
				edges = append(edges, fmt.Sprintf("p%d>p%d", i, j))
			}
		}
	}
	for i := range n {
		edges = append(edges, fmt.Sprintf("p%d", i))
	}
	return edges
}

// checkInvariants asserts what must hold between any two operations:
// a project is active in at most one full chain, and a member that builds
// without a queued rebuild was triggered after all its in-chain upstreams
// succeeded (they still have, or the member would be requeued).
func checkInvariants(t *testing.T, e *env) {
	t.Helper()
	if err := e.store.CheckChainCache(e.ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := e.engine.Chains(e.ctx, chain.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]int64{}
	for _, c := range cs {
		if c.State != chain.Running && c.State != chain.Blocked {
			continue
		}
		for _, m := range c.Members {
			if c.Mode == chain.Full {
				if o, ok := owner[m.Project]; ok {
					t.Fatalf("%s is a member of active chains %d and %d", m.Project, o, c.ID)
				}
				owner[m.Project] = c.ID
			}
			if !m.State.Building() || m.Requeued {
				continue
			}
			for _, u := range m.Upstreams {
				if um := member(c, u); um.State != chain.Success {
					t.Fatalf("chain %d: %s is %s while its upstream %s is %s\n%s", c.ID, m.Project, m.State, u, um.State, states(c))
				}
			}
		}
	}
}

// FuzzSingleRebuild: one rebuild of a random DAG with random outcomes;
// failures are resumed by a later success. Every project is built exactly
// once, never before its in-chain upstreams succeeded, and the chain ends
// finished.
func FuzzSingleRebuild(f *testing.F) {
	for seed := range uint64(12) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 42))
		e := newEnv(t, chain.Full, randomDAG(r, 2+r.IntN(7))...)
		id := e.rebuild("p0")
		extID := int64(1 << 30)
		for step := 0; step < 200; step++ {
			e.send()
			checkInvariants(t, e)
			v := e.chain(id)
			if v.State == chain.Finished {
				break
			}
			var live, broken []chain.MemberView
			for _, m := range v.Members {
				switch m.State {
				case chain.Triggered, chain.MemberRunning:
					live = append(live, m)
				case chain.Failed, chain.Canceled:
					broken = append(broken, m)
				}
			}
			switch {
			case len(live) > 0:
				m := live[r.IntN(len(live))]
				status := []string{"success", "success", "success", "running", "failed", "canceled"}[r.IntN(6)]
				e.finish(m.Project, status)
			case len(broken) > 0:
				extID++
				e.external(broken[r.IntN(len(broken))].Project, extID, "success")
			default:
				t.Fatalf("chain stalled: %s", states(v))
			}
		}
		v := e.chain(id)
		if v.State != chain.Finished {
			t.Fatalf("chain not finished: %s", states(v))
		}
		for _, m := range v.Members {
			// A member resumed by someone else's success was not built by depsd.
			if n := e.count(m.Project); n > 1 {
				t.Errorf("%s built %d times", m.Project, n)
			}
			if m.Builds > 1 {
				t.Errorf("%s has %d builds", m.Project, m.Builds)
			}
		}
	})
}

// FuzzMixedChanges: rebuilds and outside successes arrive at random while
// chains run, and pipelines end in random order. The invariants of
// checkInvariants hold after every operation.
func FuzzMixedChanges(f *testing.F) {
	for seed := range uint64(12) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 2 + r.IntN(7)
		e := newEnv(t, chain.Full, randomDAG(r, n)...)
		extID := int64(1 << 30)
		for step := 0; step < 80; step++ {
			p := fmt.Sprintf("p%d", r.IntN(n))
			switch op := r.IntN(10); {
			case op == 0:
				e.rebuild(p)
			case op == 1:
				extID++
				e.external(p, extID, "success")
			case op < 4:
				e.send()
			default:
				ps := e.gl.pipelinesSnapshot()
				var open []fakePipeline
				for _, pl := range ps {
					if pl.Status == "created" || pl.Status == "running" {
						open = append(open, pl)
					}
				}
				if len(open) == 0 {
					continue
				}
				pl := open[r.IntN(len(open))]
				status := []string{"success", "success", "running", "failed"}[r.IntN(4)]
				e.finishPipeline(e.pathOf(pl.ProjectID), pl, status)
			}
			checkInvariants(t, e)
		}
	})
}
