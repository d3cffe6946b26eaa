package deps

// csr is a graph in compressed sparse row form over dense local indices
// 0..n-1: the successors of v are adj[start[v]:start[v+1]]. Waves and Cycles
// build one for exactly the part of the graph they look at, so the algorithms
// below run on flat slices whatever the size of the whole graph.
type csr struct {
	start []int32
	adj   []int32
}

func (c *csr) len() int { return len(c.start) - 1 }

func (c *csr) succ(v int32) []int32 { return c.adj[c.start[v]:c.start[v+1]] }

// sccs labels each node with its strongly connected component using Tarjan's
// algorithm, written with an explicit stack: the recursive form would need a
// goroutine stack as deep as the longest path, and graphs have 100,000 nodes.
// It returns the component of every node and the number of components.
func (c *csr) sccs() (comp []int32, n int32) {
	size := c.len()
	index := make([]int32, size) // 0: not visited yet; otherwise DFS order + 1
	low := make([]int32, size)
	onStack := make([]bool, size)
	comp = make([]int32, size)
	var stack []int32 // Tarjan's stack of nodes whose component is open
	type frame struct {
		v    int32
		next int32 // position in adj of the next successor to look at
	}
	var frames []frame
	var counter int32
	visit := func(v int32) {
		counter++
		index[v], low[v] = counter, counter
		stack = append(stack, v)
		onStack[v] = true
		frames = append(frames, frame{v: v, next: c.start[v]})
	}
	for s := range int32(size) {
		if index[s] != 0 {
			continue
		}
		visit(s)
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			v := f.v
			if f.next < c.start[v+1] {
				w := c.adj[f.next]
				f.next++
				if index[w] == 0 {
					visit(w) // may reallocate frames: f is not used after this
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			frames = frames[:len(frames)-1]
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = n
					if w == v {
						break
					}
				}
				n++
			}
			if len(frames) > 0 {
				p := frames[len(frames)-1].v
				low[p] = min(low[p], low[v])
			}
		}
	}
	return comp, n
}

// cyclic marks the nodes that lie on a cycle: members of a strongly
// connected component of two or more nodes, and nodes with a self-edge.
func (c *csr) cyclic() []bool {
	comp, n := c.sccs()
	sizes := make([]int32, n)
	for _, k := range comp {
		sizes[k]++
	}
	on := make([]bool, c.len())
	for v := range int32(c.len()) {
		if sizes[comp[v]] > 1 {
			on[v] = true
			continue
		}
		for _, w := range c.succ(v) {
			if w == v {
				on[v] = true
				break
			}
		}
	}
	return on
}
