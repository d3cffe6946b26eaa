package deps

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// layeredGraph builds a graph shaped like a real image instance with n
// projects: 5 base images; runtimes (1%) FROM a base, some also copying from
// a second base; frameworks (5%) FROM a runtime, some on two runtimes; and
// apps FROM a runtime or a framework, a tenth of which also list an earlier
// app or a framework in .gitlab-deps. That gives diamonds at every level and
// chains up to a few dozen deep. It is acyclic and deterministic.
func layeredGraph(n int) *Graph {
	r := rand.New(rand.NewPCG(1, 2))
	g := NewGraph()
	bases := []string{"base/debian", "base/alpine", "base/ubi", "base/ubuntu", "base/distroless"}
	for _, b := range bases {
		g.AddProject(b)
	}
	runtimes := make([]string, max(10, n/100))
	for i := range runtimes {
		runtimes[i] = fmt.Sprintf("runtimes/rt%d", i)
		g.AddEdge(bases[r.IntN(len(bases))], runtimes[i])
		if r.IntN(10) == 0 {
			g.AddEdge(bases[r.IntN(len(bases))], runtimes[i])
		}
	}
	frameworks := make([]string, max(20, n/20))
	for i := range frameworks {
		frameworks[i] = fmt.Sprintf("frameworks/fw%d", i)
		g.AddEdge(runtimes[r.IntN(len(runtimes))], frameworks[i])
		if r.IntN(5) == 0 {
			g.AddEdge(runtimes[r.IntN(len(runtimes))], frameworks[i])
		}
	}
	apps := make([]string, n-len(bases)-len(runtimes)-len(frameworks))
	for i := range apps {
		apps[i] = fmt.Sprintf("team%d/app%d", i%200, i)
		if r.IntN(2) == 0 {
			g.AddEdge(runtimes[r.IntN(len(runtimes))], apps[i])
		} else {
			g.AddEdge(frameworks[r.IntN(len(frameworks))], apps[i])
		}
		if r.IntN(10) == 0 {
			if i > 0 && r.IntN(2) == 0 {
				g.AddEdge(apps[r.IntN(i)], apps[i])
			} else {
				g.AddEdge(frameworks[r.IntN(len(frameworks))], apps[i])
			}
		}
	}
	return g
}

var benchSizes = []int{10_000, 100_000}

func BenchmarkAffected(b *testing.B) {
	for _, n := range benchSizes {
		g := layeredGraph(n)
		for _, root := range []string{"base/debian", "runtimes/rt3"} {
			b.Run(fmt.Sprintf("n=%d/root=%s", n, root), func(b *testing.B) {
				b.ReportAllocs()
				var got int
				for b.Loop() {
					got = len(g.Affected(root))
				}
				b.ReportMetric(float64(got), "affected")
			})
		}
	}
}

// BenchmarkAffectedCold is the first query after a (re)build of the graph:
// it pays for ranking every path once, which later queries share.
func BenchmarkAffectedCold(b *testing.B) {
	for _, n := range benchSizes {
		g := layeredGraph(n)
		b.Run(fmt.Sprintf("n=%d/root=runtimes/rt3", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				g.AddProject(fmt.Sprintf("new/p%d", i)) // drops the cached ranking
				g.Affected("runtimes/rt3")
			}
		})
	}
}

func BenchmarkWaves(b *testing.B) {
	for _, n := range benchSizes {
		g := layeredGraph(n)
		for _, root := range []string{"base/debian", "runtimes/rt3"} {
			b.Run(fmt.Sprintf("n=%d/root=%s", n, root), func(b *testing.B) {
				b.ReportAllocs()
				var got, depth int
				for b.Loop() {
					w := g.Waves(root)
					depth = len(w)
					got = 0
					for _, wave := range w {
						got += len(wave)
					}
				}
				b.ReportMetric(float64(got), "members")
				b.ReportMetric(float64(depth), "waves")
			})
		}
	}
}

func BenchmarkCycles(b *testing.B) {
	for _, n := range benchSizes {
		g := layeredGraph(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.Cycles()
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				layeredGraph(n)
			}
		})
	}
}
