package report

import (
	"cmp"
	"slices"
	"sort"
)

// Picture is a graph laid out in layers, left to right in build order:
// external base images in the first column, then every project in the
// column after the last of its upstreams (its wave in a rebuild of the
// whole graph). Projects on a cycle are placed as if the edges closing the
// cycle were absent, and marked. Coordinates are in pixels.
type Picture struct {
	Width, Height int
	Nodes         []Node
	Edges         []Edge
	Layers        int // columns, external images included
	Projects      int // project nodes (not external images)
}

// Node is one box of a Picture.
type Node struct {
	Name string // node key, or image reference for an external image
	// Label is what the box says when it differs from Name
	// (deps.NodeLabel: project@branch).
	Label    string
	External bool // an image from outside the instance (e.g. debian:12)
	Cycle    bool // on a dependency cycle (never followed by a chain)
	Focus    bool // the project the view is about
	// Note is a short remark drawn after the name, e.g. "+40 downstream".
	Note       string
	Layer      int
	X, Y, W, H int
}

// Edge is one arrow of a Picture: To is built after (from) From.
type Edge struct {
	From, To int // indexes into Nodes
	External bool
	Cycle    bool // both ends in one cycle: the edge is never followed
	// Pinned: To pins From by digest; a change of From reaches To
	// through a merge request moving the pin.
	Pinned bool
}

// LayoutOptions tune Layout.
type LayoutOptions struct {
	// Focus marks one project as the subject of the view.
	Focus string
	// Notes adds a remark to the named nodes (see Node.Note).
	Notes map[string]string
	// NoExternal leaves external images out.
	NoExternal bool
}

// Geometry of the layout, in pixels. Labels are drawn in a monospace font
// (see svg.go), so a label's width follows from its length.
const (
	charWidth  = 7.3 // 12 px DejaVu Sans Mono and most monospace fonts
	nodeHeight = 24
	rowGap     = 10
	colGap     = 56
	padX       = 10 // inside a box, each side
	margin     = 16
	legendH    = 28
)

// Layout places doc's projects (and their external images) in layers.
// It is deterministic: the same document gives the same picture.
func Layout(doc Graph, opts LayoutOptions) Picture {
	var pic Picture
	index := map[string]int{}
	add := func(n Node) int {
		index[n.Name] = len(pic.Nodes)
		pic.Nodes = append(pic.Nodes, n)
		return len(pic.Nodes) - 1
	}
	for _, p := range doc.Projects {
		add(Node{Name: p.Path, Label: p.Label, Focus: p.Path == opts.Focus, Note: opts.Notes[p.Path]})
	}
	pic.Projects = len(pic.Nodes)
	pinned := map[[2]string]bool{}
	for _, p := range doc.Projects {
		for u := range p.UpstreamPins {
			pinned[[2]string{u, p.Path}] = true
		}
	}
	for _, p := range doc.Projects {
		for _, d := range p.Downstream {
			if j, ok := index[d]; ok {
				pic.Edges = append(pic.Edges, Edge{From: index[p.Path], To: j, Pinned: pinned[[2]string{p.Path, d}]})
			}
		}
	}
	if !opts.NoExternal {
		var images []string
		users := map[string][]string{}
		for _, p := range doc.Projects {
			for _, e := range p.External {
				if users[e] == nil {
					images = append(images, e)
				}
				users[e] = append(users[e], p.Path)
			}
		}
		sort.Strings(images)
		for _, img := range images {
			i := add(Node{Name: img, External: true, Note: opts.Notes[img]})
			for _, u := range users[img] {
				pic.Edges = append(pic.Edges, Edge{From: i, To: index[u], External: true})
			}
		}
	}
	markCycles(&pic)
	layer(&pic)
	order := orderLayers(&pic)
	place(&pic, order)
	return pic
}

// markCycles marks the nodes and edges inside a strongly connected
// component of more than one node, and self-edges (Tarjan's algorithm).
func markCycles(pic *Picture) {
	n := len(pic.Nodes)
	succ := make([][]int, n)
	for _, e := range pic.Edges {
		succ[e.From] = append(succ[e.From], e.To)
	}
	idx, low, comp := make([]int, n), make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range idx {
		idx[i] = -1
	}
	var stack []int
	next, ncomp := 0, 0
	var visit func(v int)
	visit = func(v int) {
		idx[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range succ[v] {
			if idx[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], idx[w])
			}
		}
		if low[v] == idx[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for v := range n {
		if idx[v] < 0 {
			visit(v)
		}
	}
	size := make([]int, ncomp)
	for v := range n {
		size[comp[v]]++
	}
	for i, e := range pic.Edges {
		if comp[e.From] == comp[e.To] && (size[comp[e.From]] > 1 || e.From == e.To) {
			pic.Edges[i].Cycle = true
			pic.Nodes[e.From].Cycle, pic.Nodes[e.To].Cycle = true, true
		}
	}
}

// layer gives every node its column: external images 0, a project one
// more than the highest of its upstreams (longest path), ignoring the
// edges inside cycles so that the rest of the graph still has an order.
func layer(pic *Picture) {
	n := len(pic.Nodes)
	indeg := make([]int, n)
	succ := make([][]int, n)
	for _, e := range pic.Edges {
		if e.Cycle {
			continue
		}
		succ[e.From] = append(succ[e.From], e.To)
		indeg[e.To]++
	}
	hasExternal := false
	for _, nd := range pic.Nodes {
		hasExternal = hasExternal || nd.External
	}
	first := 0
	if hasExternal {
		first = 1
	}
	var queue []int
	for v := range n {
		if pic.Nodes[v].External {
			pic.Nodes[v].Layer = 0
		} else {
			pic.Nodes[v].Layer = first
		}
		if indeg[v] == 0 {
			queue = append(queue, v)
		}
	}
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		for _, w := range succ[v] {
			pic.Nodes[w].Layer = max(pic.Nodes[w].Layer, pic.Nodes[v].Layer+1)
			if indeg[w]--; indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	for _, nd := range pic.Nodes {
		pic.Layers = max(pic.Layers, nd.Layer+1)
	}
}

// orderLayers orders the nodes of each column to keep edges short and
// crossings few: a few sweeps of the barycenter heuristic, starting from
// alphabetical order.
func orderLayers(pic *Picture) [][]int {
	order := make([][]int, pic.Layers)
	for v, nd := range pic.Nodes {
		order[nd.Layer] = append(order[nd.Layer], v)
	}
	for _, col := range order {
		slices.SortFunc(col, func(a, b int) int { return cmp.Compare(pic.Nodes[a].Name, pic.Nodes[b].Name) })
	}
	pos := make([]float64, len(pic.Nodes))
	setPos := func() {
		for _, col := range order {
			for i, v := range col {
				pos[v] = float64(i) - float64(len(col))/2
			}
		}
	}
	up := make([][]int, len(pic.Nodes))
	down := make([][]int, len(pic.Nodes))
	for _, e := range pic.Edges {
		if e.Cycle {
			continue
		}
		down[e.From] = append(down[e.From], e.To)
		up[e.To] = append(up[e.To], e.From)
	}
	sweep := func(l int, nb [][]int) {
		col := order[l]
		bary := make(map[int]float64, len(col))
		for _, v := range col {
			if len(nb[v]) == 0 {
				bary[v] = pos[v]
				continue
			}
			sum := 0.0
			for _, w := range nb[v] {
				sum += pos[w]
			}
			bary[v] = sum / float64(len(nb[v]))
		}
		slices.SortStableFunc(col, func(a, b int) int { return cmp.Compare(bary[a], bary[b]) })
		for i, v := range col {
			pos[v] = float64(i) - float64(len(col))/2
		}
	}
	setPos()
	for range 4 {
		for l := 1; l < len(order); l++ {
			sweep(l, up)
		}
		for l := len(order) - 2; l >= 0; l-- {
			sweep(l, down)
		}
	}
	return order
}

// place turns columns and ranks into pixels. Each node is drawn level with
// the middle of its upstreams where the nodes above it leave room (so a
// project sits next to what it is built from); nodes with no upstream in
// the picture, external images among them, are then moved level with
// their downstreams.
func place(pic *Picture, order [][]int) {
	const row = nodeHeight + rowGap
	up := make([][]int, len(pic.Nodes))
	down := make([][]int, len(pic.Nodes))
	for _, e := range pic.Edges {
		if !e.Cycle {
			up[e.To] = append(up[e.To], e.From)
			down[e.From] = append(down[e.From], e.To)
		}
	}
	centre := func(vs []int) (int, bool) {
		if len(vs) == 0 {
			return 0, false
		}
		sum := 0
		for _, v := range vs {
			sum += pic.Nodes[v].Y
		}
		return sum / len(vs), true
	}
	// pack gives col's nodes, in order, the y closest to what want says
	// without overlapping the node above.
	pack := func(col []int, want func(v int) (int, bool)) {
		next := margin
		for _, v := range col {
			y := next
			if w, ok := want(v); ok && w > y {
				y = w
			}
			pic.Nodes[v].Y = y
			next = y + row
		}
	}
	for _, col := range order {
		pack(col, func(v int) (int, bool) { return centre(up[v]) })
	}
	for _, col := range order {
		if slices.ContainsFunc(col, func(v int) bool { return len(up[v]) == 0 }) {
			pack(col, func(v int) (int, bool) {
				if len(up[v]) > 0 {
					return pic.Nodes[v].Y, true
				}
				return centre(down[v])
			})
		}
	}
	x, bottom := margin, margin
	for _, col := range order {
		width := 0
		for _, v := range col {
			width = max(width, labelWidth(pic.Nodes[v]))
		}
		for _, v := range col {
			nd := &pic.Nodes[v]
			nd.X, nd.W, nd.H = x, width, nodeHeight
			bottom = max(bottom, nd.Y+nodeHeight)
		}
		x += width + colGap
	}
	pic.Width = max(x-colGap+margin, 360)
	pic.Height = bottom + margin + legendH
}

func labelWidth(nd Node) int {
	return int(float64(len([]rune(label(nd))))*charWidth) + 2*padX
}

// label is the text drawn in a node's box. Markers keep the states
// distinguishable without colour: ↻ on a cycle, ★ for the focus, "image"
// for an external image.
func label(nd Node) string {
	s := nd.Name
	if nd.Label != "" {
		s = nd.Label
	}
	switch {
	case nd.External:
		s = "image " + s
	case nd.Cycle:
		s = "↻ " + s
	}
	if nd.Focus {
		s = "★ " + s
	}
	if nd.Note != "" {
		s += " (" + nd.Note + ")"
	}
	return s
}
