package deps

import "slices"

// Cycles reports the dependency cycles of the graph: one representative cycle
// per strongly connected component of two or more projects, plus every
// self-edge. Each is a path that starts and ends at the component's smallest
// project, e.g. [a b a]; it is the shortest such cycle, ties broken by project
// path, so the result depends only on the graph and not on insertion order.
// Cycles are sorted. A cycle is reported rather than broken: Waves never
// follows it, and the operator fixes the declarations.
func (g *Graph) Cycles() [][]string {
	n := len(g.paths)
	if n == 0 {
		return nil
	}
	rank := g.sorted().rank // integer comparisons instead of string ones
	// The whole graph as CSR, successors sorted by path.
	var all csr
	all.start = make([]int32, 0, n+1)
	all.adj = make([]int32, 0, g.edges)
	all.start = append(all.start, 0)
	for v := range n {
		first := len(all.adj)
		all.adj = append(all.adj, g.down[v]...)
		slices.SortFunc(all.adj[first:], func(a, b int32) int { return int(rank[a] - rank[b]) })
		all.start = append(all.start, int32(len(all.adj)))
	}

	comp, ncomp := all.sccs()
	size := make([]int32, ncomp)
	smallest := make([]int32, ncomp) // the member with the lowest rank
	for i := range smallest {
		smallest[i] = -1
	}
	for v := range int32(n) {
		c := comp[v]
		size[c]++
		if smallest[c] < 0 || rank[v] < rank[smallest[c]] {
			smallest[c] = v
		}
	}

	var cycles [][]string
	parent := make([]int32, n) // BFS tree, reset for every component visited
	for i := range parent {
		parent[i] = -1
	}
	for c := range ncomp {
		if size[c] > 1 {
			cycles = append(cycles, g.shortestCycle(&all, comp, smallest[c], parent))
		}
	}
	for v := range int32(n) {
		if slices.Contains(all.succ(v), v) {
			cycles = append(cycles, []string{g.paths[v], g.paths[v]})
		}
	}
	slices.SortFunc(cycles, slices.Compare)
	return cycles
}

// shortestCycle finds, breadth-first within s's component, the shortest path
// from s back to s that leaves s (self-edges are reported on their own).
// Successors are visited in path order, so the result is deterministic.
// parent must be all -1 on entry and is left so.
func (g *Graph) shortestCycle(all *csr, comp []int32, s int32, parent []int32) []string {
	queue := []int32{s}
	parent[s] = s
	last := int32(-1) // the node whose edge closes the cycle back to s
	for i := 0; i < len(queue) && last < 0; i++ {
		v := queue[i]
		for _, w := range all.succ(v) {
			if w == s && v != s {
				last = v
				break
			}
			if parent[w] < 0 && comp[w] == comp[s] {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	var rev []string
	for v := last; v != s; v = parent[v] {
		rev = append(rev, g.paths[v])
	}
	path := make([]string, 0, len(rev)+2)
	path = append(path, g.paths[s])
	for i := len(rev) - 1; i >= 0; i-- {
		path = append(path, rev[i])
	}
	path = append(path, g.paths[s])
	for _, v := range queue {
		parent[v] = -1
	}
	return path
}
