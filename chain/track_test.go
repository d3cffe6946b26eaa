package chain

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestIncrementalSettleMatchesFullSettle changes random members of random
// chains, as events do, and settles each time both incrementally (the
// engine's way: only what changed and what it reaches) and from scratch
// (every member in topological order, members on a cycle last): states, reasons, the chain's state
// and the members that became ready, in order, must be the same.
func TestIncrementalSettleMatchesFullSettle(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 2))
	now := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	states := []MemberState{Waiting, Pending, Triggered, MemberRunning, Success, Failed, Canceled, MemberBlocked, MemberSkipped, MemberExpired}
	for round := range 200 {
		c := &Chain{ID: 1, Mode: Full, State: Running}
		n := 2 + r.IntN(30)
		for i := range n {
			m := &Member{Project: fmt.Sprintf("p%02d", i), State: Waiting}
			for j := range n {
				// Now and then a cycle: the graph changed under a chain
				// that merged later.
				if (j < i && r.IntN(4) == 0) || (j > i && r.IntN(60) == 0) {
					m.Upstreams = append(m.Upstreams, fmt.Sprintf("p%02d", j))
				}
			}
			c.add(m)
		}
		c.begin()
		c.settle(now)
		for step := range 25 {
			for range 1 + r.IntN(3) {
				m := c.Members[r.IntN(n)]
				m.State = states[r.IntN(len(states))]
				m.Why = fmt.Sprintf("why %d", r.IntN(3))
				m.PipelineID = int64(r.IntN(3))
				c.changed(m)
			}
			ref := copyChain(c)
			now = now.Add(time.Second)
			got := projects(c.settle(now))
			want := projects(ref.settle(now))
			if !slices.Equal(got, want) || describe(c) != describe(ref) {
				t.Fatalf("round %d step %d: incremental settle made ready %v and\n%s\nfull settle made ready %v and\n%s",
					round, step, got, describe(c), want, describe(ref))
			}
		}
	}
}

// copyChain returns a deep copy of c that knows nothing derived.
func copyChain(c *Chain) *Chain {
	out := &Chain{ID: c.ID, Mode: c.Mode, State: c.State, EndedAt: c.EndedAt}
	for _, m := range c.Members {
		mm := *m
		mm.Upstreams = slices.Clone(m.Upstreams)
		out.Members = append(out.Members, &mm)
	}
	return out
}

func projects(ms []*Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Project)
	}
	return out
}

func describe(c *Chain) string {
	s := fmt.Sprintf("chain %s ended %v\n", c.State, c.EndedAt)
	for _, m := range c.Members {
		s += fmt.Sprintf("  %s %s %q\n", m.Project, m.State, m.Why)
	}
	return s
}

// TestSaveSetNamesEveryChangeOfTheTransaction: a store writes the members
// SaveSet names; saved twice in one transaction, the second save still
// names what the first wrote and what changed since; outside an engine
// transaction, and after members were added, every member is written.
func TestSaveSetNamesEveryChangeOfTheTransaction(t *testing.T) {
	c := &Chain{ID: 1, Mode: Full, State: Running}
	c.begin()
	for _, p := range []string{"a", "b", "c"} {
		c.add(&Member{Project: p, State: Waiting})
	}
	if _, all := c.SaveSet(); !all {
		t.Fatal("members added: want every member written")
	}
	c.end()
	c.begin()
	if ms, all := c.SaveSet(); all || len(ms) != 0 {
		t.Fatalf("nothing changed: got %v, all %v", projects(ms), all)
	}
	c.changed(c.Member("c"))
	if ms, all := c.SaveSet(); all || !slices.Equal(projects(ms), []string{"c"}) {
		t.Fatalf("first save: got %v, all %v; want [c]", projects(ms), all)
	}
	c.changed(c.Member("a"))
	if ms, all := c.SaveSet(); all || !slices.Equal(projects(ms), []string{"a", "c"}) {
		t.Fatalf("second save: got %v, all %v; want [a c]", projects(ms), all)
	}
	c.end()
	c.Member("b").State = Failed // outside an engine transaction
	if _, all := c.SaveSet(); !all {
		t.Fatal("a chain changed outside an engine transaction: want every member written")
	}
}
