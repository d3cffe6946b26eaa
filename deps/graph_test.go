package deps

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type edge struct{ up, down string }

func buildGraph(projects []string, edges []edge) *Graph {
	g := NewGraph()
	for _, p := range projects {
		g.AddProject(p)
	}
	for _, e := range edges {
		g.AddEdge(e.up, e.down)
	}
	return g
}

func TestGraph(t *testing.T) {
	type want struct {
		upstream   map[string][]string
		downstream map[string][]string
		affected   map[string][]string
		waves      map[string][][]string // key: roots joined by ","
		cycles     [][]string
	}
	tests := []struct {
		name     string
		projects []string
		edges    []edge
		want     want
	}{
		{
			name:  "linear chain",
			edges: []edge{{"base", "ruby"}, {"ruby", "app"}},
			want: want{
				upstream:   map[string][]string{"base": nil, "ruby": {"base"}, "app": {"ruby"}},
				downstream: map[string][]string{"base": {"ruby"}, "app": nil},
				affected:   map[string][]string{"base": {"app", "ruby"}, "ruby": {"app"}, "app": nil},
				waves: map[string][][]string{
					"base": {{"base"}, {"ruby"}, {"app"}},
					"ruby": {{"ruby"}, {"app"}},
					"app":  {{"app"}},
				},
			},
		},
		{
			name:  "diamond: c once, after both a and b",
			edges: []edge{{"base", "b"}, {"base", "a"}, {"a", "c"}, {"b", "c"}},
			want: want{
				upstream: map[string][]string{"c": {"a", "b"}},
				affected: map[string][]string{"base": {"a", "b", "c"}, "a": {"c"}},
				waves: map[string][][]string{
					"base": {{"base"}, {"a", "b"}, {"c"}},
					"a":    {{"a"}, {"c"}},
					"a,b":  {{"a", "b"}, {"c"}},
				},
			},
		},
		{
			name:  "uneven diamond: c waits for the longer branch",
			edges: []edge{{"base", "a"}, {"a", "a2"}, {"a2", "c"}, {"base", "c"}},
			want: want{
				waves: map[string][][]string{"base": {{"base"}, {"a"}, {"a2"}, {"c"}}},
			},
		},
		{
			name:  "wide fan-out",
			edges: []edge{{"base", "z"}, {"base", "m"}, {"base", "a"}, {"base", "q"}},
			want: want{
				downstream: map[string][]string{"base": {"a", "m", "q", "z"}},
				affected:   map[string][]string{"base": {"a", "m", "q", "z"}},
				waves:      map[string][][]string{"base": {{"base"}, {"a", "m", "q", "z"}}},
			},
		},
		{
			name:     "disconnected",
			projects: []string{"lonely"},
			edges:    []edge{{"x", "y"}, {"p", "q"}},
			want: want{
				affected: map[string][]string{"x": {"y"}, "lonely": nil},
				waves: map[string][][]string{
					"x":        {{"x"}, {"y"}},
					"lonely":   {{"lonely"}},
					"x,p":      {{"p", "x"}, {"q", "y"}},
					"lonely,p": {{"lonely", "p"}, {"q"}},
				},
			},
		},
		{
			name:  "duplicate edges are one edge",
			edges: []edge{{"base", "app"}, {"base", "app"}, {"base", "app"}},
			want: want{
				upstream:   map[string][]string{"app": {"base"}},
				downstream: map[string][]string{"base": {"app"}},
				waves:      map[string][][]string{"base": {{"base"}, {"app"}}},
			},
		},
		{
			name:  "self-loop is a cycle and never followed",
			edges: []edge{{"base", "self"}, {"self", "self"}, {"self", "after"}, {"base", "ok"}},
			want: want{
				upstream: map[string][]string{"self": {"base", "self"}},
				affected: map[string][]string{"self": {"after"}},
				waves: map[string][][]string{
					"base": {{"base"}, {"ok"}},
					"self": nil,
				},
				cycles: [][]string{{"self", "self"}},
			},
		},
		{
			name: "cycle reachable from a root",
			// base → a → b → c → a, and c → d; base → e → d.
			edges: []edge{{"base", "a"}, {"a", "b"}, {"b", "c"}, {"c", "a"}, {"c", "d"}, {"base", "e"}, {"e", "d"}, {"b", "only-via-cycle"}},
			want: want{
				affected: map[string][]string{"a": {"b", "c", "d", "only-via-cycle"}, "base": {"a", "b", "c", "d", "e", "only-via-cycle"}},
				waves: map[string][][]string{
					// d is reachable via e, and does not wait for the cycle.
					"base": {{"base"}, {"e"}, {"d"}},
					"b":    nil,
				},
				cycles: [][]string{{"a", "b", "c", "a"}},
			},
		},
		{
			name: "several cycles, shortest representative from the smallest node",
			edges: []edge{
				{"x", "y"}, {"y", "x"}, {"y", "z"}, {"z", "x"}, // one SCC {x,y,z}: x→y→x is shortest
				{"m", "n"}, {"n", "o"}, {"o", "m"}, {"m", "m"}, // SCC {m,n,o} with a self-loop on m
				{"b", "a"}, {"a", "b"},
			},
			want: want{
				cycles: [][]string{{"a", "b", "a"}, {"m", "m"}, {"m", "n", "o", "m"}, {"x", "y", "x"}},
			},
		},
		{
			name:  "a root downstream of another root is built after it",
			edges: []edge{{"base", "runtime"}, {"runtime", "app"}, {"base", "tool"}},
			want: want{
				waves: map[string][][]string{
					"runtime,base":      {{"base"}, {"runtime", "tool"}, {"app"}},
					"app,base":          {{"base"}, {"runtime", "tool"}, {"app"}},
					"app,runtime,app":   {{"runtime"}, {"app"}},
					"unknown,runtime":   {{"runtime"}, {"app"}},
					"tool,app":          {{"app", "tool"}},
					"base,base,runtime": {{"base"}, {"runtime", "tool"}, {"app"}},
				},
			},
		},
		{
			name:  "unknown project",
			edges: []edge{{"a", "b"}},
			want: want{
				upstream:   map[string][]string{"nope": nil},
				downstream: map[string][]string{"nope": nil},
				affected:   map[string][]string{"nope": nil},
				waves:      map[string][][]string{"nope": nil, "": nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := buildGraph(tt.projects, tt.edges)
			for p, w := range tt.want.upstream {
				if got := g.Upstream(p); !reflect.DeepEqual(got, w) {
					t.Errorf("Upstream(%q) = %q, want %q", p, got, w)
				}
			}
			for p, w := range tt.want.downstream {
				if got := g.Downstream(p); !reflect.DeepEqual(got, w) {
					t.Errorf("Downstream(%q) = %q, want %q", p, got, w)
				}
			}
			for p, w := range tt.want.affected {
				if got := g.Affected(p); !reflect.DeepEqual(got, w) {
					t.Errorf("Affected(%q) = %q, want %q", p, got, w)
				}
			}
			for roots, w := range tt.want.waves {
				var rs []string
				if roots != "" {
					rs = strings.Split(roots, ",")
				}
				if got := g.Waves(rs...); !reflect.DeepEqual(got, w) {
					t.Errorf("Waves(%q) = %q, want %q", rs, got, w)
				}
			}
			if got := g.Cycles(); !reflect.DeepEqual(got, tt.want.cycles) {
				t.Errorf("Cycles() = %q, want %q", got, tt.want.cycles)
			}
		})
	}
}

func TestGraphProjectsAndCounts(t *testing.T) {
	g := buildGraph([]string{"z/lonely", "a/base"}, []edge{{"a/base", "m/app"}, {"a/base", "m/app"}, {"m/app", "m/app"}})
	if got, want := g.Projects(), []string{"a/base", "m/app", "z/lonely"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Projects() = %q, want %q", got, want)
	}
	if g.Len() != 3 || g.EdgeCount() != 2 {
		t.Errorf("Len, EdgeCount = %d, %d; want 3, 2", g.Len(), g.EdgeCount())
	}
	if !g.Has("z/lonely") || g.Has("nope") {
		t.Errorf("Has is wrong")
	}
	if got := NewGraph().Projects(); got != nil {
		t.Errorf("empty graph Projects() = %q, want nil", got)
	}
	if got := NewGraph().Cycles(); got != nil {
		t.Errorf("empty graph Cycles() = %q, want nil", got)
	}
}

// The results must not depend on the order in which a scan added edges.
func TestGraphDeterministic(t *testing.T) {
	edges := []edge{
		{"base", "a"}, {"base", "b"}, {"a", "c"}, {"b", "c"}, {"c", "d"}, {"d", "e"}, {"e", "c"},
		{"base", "f"}, {"f", "g"}, {"g", "f"}, {"x", "x"},
	}
	want := buildGraph(nil, edges)
	for i := range 20 {
		shuffled := append([]edge(nil), edges...)
		for j := range shuffled { // a fixed permutation per i
			k := (j*7 + i*13) % len(shuffled)
			shuffled[j], shuffled[k] = shuffled[k], shuffled[j]
		}
		g := buildGraph(nil, shuffled)
		for _, check := range []struct {
			name      string
			got, want any
		}{
			{"Cycles", g.Cycles(), want.Cycles()},
			{"Waves", g.Waves("base", "x"), want.Waves("base", "x")},
			{"Affected", g.Affected("base"), want.Affected("base")},
			{"Upstream", g.Upstream("c"), want.Upstream("c")},
		} {
			if !reflect.DeepEqual(check.got, check.want) {
				t.Fatalf("permutation %d: %s = %q, want %q", i, check.name, check.got, check.want)
			}
		}
	}
}

// A chain of 100,000 projects, and one long cycle, must not overflow anything:
// the algorithms are iterative.
func TestGraphDeepChain(t *testing.T) {
	const n = 100_000
	g := NewGraph()
	name := func(i int) string { return fmt.Sprintf("p%06d", i) }
	for i := 1; i < n; i++ {
		g.AddEdge(name(i-1), name(i))
	}
	if got := len(g.Waves(name(0))); got != n {
		t.Fatalf("Waves of a %d-long chain has %d waves", n, got)
	}
	if got := len(g.Affected(name(0))); got != n-1 {
		t.Fatalf("Affected has %d projects, want %d", got, n-1)
	}
	g.AddEdge(name(n-1), name(0))
	cycles := g.Cycles()
	if len(cycles) != 1 || len(cycles[0]) != n+1 || cycles[0][0] != name(0) {
		t.Fatalf("Cycles() on a ring: got %d cycles", len(cycles))
	}
	if w := g.Waves(name(0)); w != nil {
		t.Fatalf("Waves on a ring = %d waves, want none", len(w))
	}
}

// The daemon reads one Graph from many goroutines; the path order computed
// by the first query after a build must be shared safely.
func TestGraphConcurrentReads(t *testing.T) {
	g := layeredGraph(2000)
	want := g.Waves("base/debian")
	g.AddProject("zz/late") // drops the cached order
	done := make(chan [][]string)
	for range 4 {
		go func() {
			g.Affected("runtimes/rt1")
			g.Projects()
			done <- g.Waves("base/debian")
		}()
	}
	for range 4 {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Errorf("concurrent Waves differ from the sequential result")
		}
	}
}
