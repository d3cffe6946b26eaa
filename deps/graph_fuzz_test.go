package deps

import (
	"fmt"
	"slices"
	"testing"
)

// FuzzGraph builds a graph from random edges among 12 projects and checks
// Waves, Affected and Cycles against brute-force definitions.
func FuzzGraph(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 0, 2}, []byte{0})
	f.Add([]byte{0, 1, 1, 0, 1, 2, 3, 3}, []byte{0, 3})
	f.Add([]byte{0, 1, 0, 2, 1, 3, 2, 3, 3, 4, 4, 2}, []byte{1, 0})
	f.Fuzz(func(t *testing.T, edgeBytes, rootBytes []byte) {
		const n = 12
		name := func(b byte) string { return fmt.Sprintf("g/p%02d", int(b)%n) }
		g := NewGraph()
		adj := make(map[string]map[string]bool)
		for i := 0; i+1 < len(edgeBytes); i += 2 {
			u, d := name(edgeBytes[i]), name(edgeBytes[i+1])
			g.AddEdge(u, d)
			if adj[u] == nil {
				adj[u] = map[string]bool{}
			}
			adj[u][d] = true
		}
		var roots []string
		for _, b := range rootBytes {
			roots = append(roots, name(b))
		}
		// reach returns what from reaches through edges, optionally only
		// through nodes that pass ok.
		reach := func(from []string, ok func(string) bool) map[string]bool {
			seen := map[string]bool{}
			queue := []string{}
			for _, r := range from {
				if g.Has(r) && ok(r) && !seen[r] {
					seen[r] = true
					queue = append(queue, r)
				}
			}
			for len(queue) > 0 {
				v := queue[0]
				queue = queue[1:]
				for w := range adj[v] {
					if !seen[w] && ok(w) {
						seen[w] = true
						queue = append(queue, w)
					}
				}
			}
			return seen
		}
		all := func(string) bool { return true }
		successorsReach := func(p string) map[string]bool {
			var next []string
			for w := range adj[p] {
				next = append(next, w)
			}
			return reach(next, all)
		}
		onCycle := func(p string) bool { return successorsReach(p)[p] }

		// Affected is exactly the transitive downstream, without p.
		for _, p := range g.Projects() {
			want := successorsReach(p)
			delete(want, p)
			got := g.Affected(p)
			if len(got) != len(want) || !slices.IsSorted(got) {
				t.Fatalf("Affected(%s) = %q, want %d projects, sorted", p, got, len(want))
			}
			for _, q := range got {
				if !want[q] {
					t.Fatalf("Affected(%s) contains %s", p, q)
				}
			}
		}

		// Waves: the set, no duplicates, and each wave is 1 + max in-set upstream.
		waves := g.Waves(roots...)
		wantSet := reach(roots, func(p string) bool { return !onCycle(p) })
		waveOf := map[string]int{}
		for k, w := range waves {
			if len(w) == 0 || !slices.IsSorted(w) {
				t.Fatalf("wave %d is empty or unsorted: %q", k, w)
			}
			for _, p := range w {
				if _, dup := waveOf[p]; dup {
					t.Fatalf("%s appears twice in %q", p, waves)
				}
				waveOf[p] = k
			}
		}
		if len(waveOf) != len(wantSet) {
			t.Fatalf("Waves(%q) = %q, want the set %v", roots, waves, wantSet)
		}
		for p, k := range waveOf {
			if !wantSet[p] {
				t.Fatalf("Waves(%q) contains %s", roots, p)
			}
			want := 0
			for _, u := range g.Upstream(p) {
				if uk, in := waveOf[u]; in {
					if uk >= k {
						t.Fatalf("edge %s→%s goes from wave %d to %d", u, p, uk, k)
					}
					want = max(want, uk+1)
				}
			}
			if k != want {
				t.Fatalf("%s is in wave %d, want %d", p, k, want)
			}
		}

		// Cycles: real paths, starting at their smallest node, one per
		// component plus self-loops, covering every node on a cycle.
		covered := map[string]bool{}
		comps := map[string]bool{}
		for _, c := range g.Cycles() {
			if len(c) < 2 || c[0] != c[len(c)-1] {
				t.Fatalf("cycle %q is not closed", c)
			}
			for i := 0; i+1 < len(c); i++ {
				if !adj[c[i]][c[i+1]] {
					t.Fatalf("cycle %q uses a missing edge %s→%s", c, c[i], c[i+1])
				}
				if c[i] < c[0] {
					t.Fatalf("cycle %q does not start at its smallest project", c)
				}
				covered[c[i]] = true
			}
			if len(c) > 2 {
				if comps[c[0]] {
					t.Fatalf("two cycles for the component of %s", c[0])
				}
				comps[c[0]] = true
			}
		}
		for _, p := range g.Projects() {
			if !onCycle(p) {
				if covered[p] {
					t.Fatalf("%s is reported on a cycle but is not on one", p)
				}
				continue
			}
			// Some node of p's component (mutually reachable with p) is covered.
			found := covered[p]
			for q := range successorsReach(p) {
				if successorsReach(q)[p] && covered[q] {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s is on a cycle that Cycles() does not report: %q", p, g.Cycles())
			}
		}
	})
}
