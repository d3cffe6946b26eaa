package deps

import (
	"slices"
	"sync/atomic"
)

// Graph is the cross-project dependency graph. Nodes are project paths
// (group/sub/project); an edge up→down means "down depends on up": down's
// image is built FROM up's, or down lists up in its .gitlab-deps.
//
// Paths are interned to dense int32 ids so that traversals of graphs with
// 100,000 projects touch slices, not maps, and allocate in proportion to the
// part of the graph they visit. Every method that returns paths returns them
// sorted, so results are deterministic whatever the insertion order.
//
// A Graph is not safe for concurrent mutation. Once built, any number of
// goroutines may read it concurrently (the only state a read sets is the
// path order below, published atomically). Callers that rescan build a new
// Graph and swap the pointer.
type Graph struct {
	ids   map[string]int32 // path → id
	paths []string         // id → path
	down  [][]int32        // id → direct downstreams, in insertion order
	up    [][]int32        // id → direct upstreams, in insertion order
	edges int
	// pinned are the edges some dependency declaring them pins by digest
	// (Dependency.Pinned), keyed up<<32 | down.
	pinned map[int64]bool

	// order ranks ids by path. Sorting results by path is most of the cost
	// of a query, and comparing int32 ranks is several times cheaper than
	// comparing strings, so the ranking is computed once, on the first query
	// after projects were added, and shared by all queries until the next.
	order atomic.Pointer[pathOrder]
}

// pathOrder ranks the ids of a graph by path: rank[id] is the position of
// paths[id] in sorted order, and byRank is the inverse.
type pathOrder struct {
	rank   []int32
	byRank []int32
}

// sorted returns the path order, computing it if projects were added since
// the last time. Concurrent readers may compute it twice; both results are
// equal, so whichever is stored last is right.
func (g *Graph) sorted() *pathOrder {
	if o := g.order.Load(); o != nil {
		return o
	}
	o := &pathOrder{rank: make([]int32, len(g.paths)), byRank: make([]int32, len(g.paths))}
	for i := range o.byRank {
		o.byRank[i] = int32(i)
	}
	slices.SortFunc(o.byRank, func(a, b int32) int {
		if g.paths[a] < g.paths[b] {
			return -1
		}
		return 1 // paths are unique
	})
	for r, id := range o.byRank {
		o.rank[id] = int32(r)
	}
	g.order.Store(o)
	return o
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{ids: make(map[string]int32)}
}

// AddProject adds a project with no edges. Adding a known project is a no-op.
// Projects without dependencies or dependents are added this way so that
// Projects lists every scanned project and Waves can start at a lone one.
func (g *Graph) AddProject(path string) {
	g.intern(path)
}

func (g *Graph) intern(path string) int32 {
	if id, ok := g.ids[path]; ok {
		return id
	}
	id := int32(len(g.paths))
	g.ids[path] = id
	g.paths = append(g.paths, path)
	g.down = append(g.down, nil)
	g.up = append(g.up, nil)
	g.order.Store(nil)
	return id
}

// AddEdge records that downstream depends on upstream, adding both projects
// if needed. A duplicate edge is ignored: a project that names the same
// upstream in FROM and in .gitlab-deps is still built once after it.
//
// A self-edge (AddEdge(p, p)) is recorded as it is: it is a cycle of length
// one, reported by Cycles as [p p], and like every node on a cycle p is left
// out of Waves. Callers that want to treat "FROM my own previous image" as
// harmless drop such references before adding them.
func (g *Graph) AddEdge(upstream, downstream string) {
	u, d := g.intern(upstream), g.intern(downstream)
	// Scan the shorter adjacency list: base images have thousands of
	// downstreams but an app has a handful of upstreams, so this keeps
	// building a wide fan-out linear instead of quadratic, without an edge set.
	if len(g.down[u]) <= len(g.up[d]) {
		if slices.Contains(g.down[u], d) {
			return
		}
	} else if slices.Contains(g.up[d], u) {
		return
	}
	g.down[u] = append(g.down[u], d)
	g.up[d] = append(g.up[d], u)
	g.edges++
}

// AddPinnedEdge records that downstream depends on upstream through a
// reference pinned by digest (with or without other, unpinned ones): a
// change of upstream reaches downstream only once its pin moves. It adds
// the edge if needed.
func (g *Graph) AddPinnedEdge(upstream, downstream string) {
	g.AddEdge(upstream, downstream)
	if g.pinned == nil {
		g.pinned = map[int64]bool{}
	}
	g.pinned[int64(g.ids[upstream])<<32|int64(g.ids[downstream])] = true
}

// Pinned reports whether downstream pins upstream by digest
// (AddPinnedEdge).
func (g *Graph) Pinned(upstream, downstream string) bool {
	u, ok := g.ids[upstream]
	d, ok2 := g.ids[downstream]
	return ok && ok2 && g.pinned[int64(u)<<32|int64(d)]
}

// PinnedUpstream returns the upstreams downstream pins by digest, sorted.
func (g *Graph) PinnedUpstream(downstream string) []string {
	d, ok := g.ids[downstream]
	if !ok || len(g.pinned) == 0 {
		return nil
	}
	var ids []int32
	for _, u := range g.up[d] {
		if g.pinned[int64(u)<<32|int64(d)] {
			ids = append(ids, u)
		}
	}
	return g.names(ids)
}

// Has reports whether path is a project of the graph.
func (g *Graph) Has(path string) bool {
	_, ok := g.ids[path]
	return ok
}

// Len returns the number of projects.
func (g *Graph) Len() int { return len(g.paths) }

// EdgeCount returns the number of distinct edges, self-edges included.
func (g *Graph) EdgeCount() int { return g.edges }

// Projects returns every project, sorted.
func (g *Graph) Projects() []string {
	if len(g.paths) == 0 {
		return nil
	}
	out := make([]string, len(g.paths))
	for i, id := range g.sorted().byRank {
		out[i] = g.paths[id]
	}
	return out
}

// Upstream returns the direct upstreams of p, sorted; nil for an unknown p.
func (g *Graph) Upstream(p string) []string {
	id, ok := g.ids[p]
	if !ok {
		return nil
	}
	return g.names(g.up[id])
}

// Downstream returns the direct downstreams of p, sorted; nil for an unknown p.
func (g *Graph) Downstream(p string) []string {
	id, ok := g.ids[p]
	if !ok {
		return nil
	}
	return g.names(g.down[id])
}

// HasDownstream reports whether something depends on p directly (its
// Downstream is not empty), without listing it.
func (g *Graph) HasDownstream(p string) bool {
	id, ok := g.ids[p]
	return ok && len(g.down[id]) > 0
}

// Affected returns every project that depends on p directly or transitively,
// excluding p itself (even when p is on a cycle), sorted; nil for an unknown
// p. It is the set a rebuild of p would have to consider. Its cost is linear
// in the affected subgraph, not in the whole graph.
func (g *Graph) Affected(p string) []string {
	id, ok := g.ids[p]
	if !ok {
		return nil
	}
	seen := map[int32]struct{}{id: {}}
	queue := []int32{id}
	for i := 0; i < len(queue); i++ {
		for _, d := range g.down[queue[i]] {
			if _, ok := seen[d]; !ok {
				seen[d] = struct{}{}
				queue = append(queue, d)
			}
		}
	}
	return g.names(queue[1:])
}

// names maps ids to their paths, sorted. It sorts ranks, not strings.
func (g *Graph) names(ids []int32) []string {
	if len(ids) == 0 {
		return nil
	}
	o := g.sorted()
	ranks := make([]int32, len(ids))
	for i, id := range ids {
		ranks[i] = o.rank[id]
	}
	slices.Sort(ranks)
	out := make([]string, len(ids))
	for i, r := range ranks {
		out[i] = g.paths[o.byRank[r]]
	}
	return out
}
