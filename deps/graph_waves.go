package deps

// Waves returns roots and everything downstream of them as topological
// levels: the order in which a rebuild of roots builds the graph. A project is
// in wave k = 1 + the highest wave of its upstreams in the set (0 when it has
// none), so it comes after every in-set upstream, and only upstreams in the
// set count. A root that is downstream of another root is therefore not in
// wave 0 but after that other root: it is built once, after it. Each wave is
// sorted.
//
// Cycles are never followed. A project on a cycle (or with a self-edge) is
// left out, and so is anything reachable from the roots only through one; a
// project reachable by another path is kept and does not wait for the cycle.
// Cycles reports what was left out and why. Unknown roots and duplicates are
// ignored; with no known root Waves returns nil.
//
// The cost is linear in the subgraph reachable from the roots.
func (g *Graph) Waves(roots ...string) [][]string {
	sub, nodes, nroots := g.reachable(roots)
	if len(nodes) == 0 {
		return nil
	}
	onCycle := sub.cyclic()

	// The set: roots off cycles and what they reach without crossing a cycle.
	in := make([]bool, len(nodes))
	queue := make([]int32, 0, len(nodes))
	for r := range int32(nroots) {
		if !onCycle[r] {
			in[r] = true
			queue = append(queue, r)
		}
	}
	for i := 0; i < len(queue); i++ {
		for _, w := range sub.succ(queue[i]) {
			if !in[w] && !onCycle[w] {
				in[w] = true
				queue = append(queue, w)
			}
		}
	}

	// Kahn's algorithm on the set; a node's wave is its longest path from a
	// source of the set. The set is acyclic, so every member gets a wave.
	pending := make([]int32, len(nodes)) // in-set upstreams not yet placed
	for _, v := range queue {
		for _, w := range sub.succ(v) {
			if in[w] {
				pending[w]++
			}
		}
	}
	wave := make([]int32, len(nodes))
	order := queue[:0] // reuse: queue's contents were only needed above
	for v := range int32(len(nodes)) {
		if in[v] && pending[v] == 0 {
			order = append(order, v)
		}
	}
	var depth int32
	for i := 0; i < len(order); i++ {
		v := order[i]
		depth = max(depth, wave[v])
		for _, w := range sub.succ(v) {
			if !in[w] {
				continue
			}
			wave[w] = max(wave[w], wave[v]+1)
			if pending[w]--; pending[w] == 0 {
				order = append(order, w)
			}
		}
	}

	if len(order) == 0 {
		return nil
	}
	// Group by wave, then let names sort each wave by rank.
	ids := make([][]int32, depth+1)
	for _, v := range order {
		ids[wave[v]] = append(ids[wave[v]], nodes[v])
	}
	out := make([][]string, depth+1)
	for k, w := range ids {
		out[k] = g.names(w)
	}
	return out
}

// reachable collects the known roots (deduplicated) and every project
// downstream of them, assigning local indices in breadth-first order: the
// roots are 0..nroots-1. It returns the subgraph as CSR and the global id of
// each local index. Only this step touches the id map; later steps use slices.
func (g *Graph) reachable(roots []string) (sub csr, nodes []int32, nroots int) {
	local := make(map[int32]int32)
	add := func(id int32) int32 {
		if l, ok := local[id]; ok {
			return l
		}
		l := int32(len(nodes))
		local[id] = l
		nodes = append(nodes, id)
		return l
	}
	for _, r := range roots {
		if id, ok := g.ids[r]; ok {
			add(id)
		}
	}
	nroots = len(nodes)
	sub.start = append(sub.start, 0)
	for i := 0; i < len(nodes); i++ {
		for _, d := range g.down[nodes[i]] {
			sub.adj = append(sub.adj, add(d))
		}
		sub.start = append(sub.start, int32(len(sub.adj)))
	}
	return sub, nodes, nroots
}
