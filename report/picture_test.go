package report

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// chainDoc: debian → base → {ruby, lint}; ruby → shop; {lint, ruby} → ci;
// other (unrelated) → leaf; x ⇄ y a cycle.
func chainDoc() (Graph, *deps.Graph) {
	from := func(ups ...string) []deps.Dependency {
		var out []deps.Dependency
		for _, u := range ups {
			out = append(out, deps.Dependency{Kind: deps.KindFrom, Image: "r/" + u, Project: u})
		}
		return out
	}
	projects := []scan.Project{
		{Path: "base", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "debian:12"}}},
		{Path: "ruby", Dependencies: from("base")},
		{Path: "lint", Dependencies: from("base")},
		{Path: "shop", Dependencies: from("ruby")},
		{Path: "ci", Dependencies: from("lint", "ruby")},
		{Path: "other", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "alpine:3"}}},
		{Path: "leaf", Dependencies: from("other")},
		{Path: "x", Dependencies: from("y")},
		{Path: "y", Dependencies: from("x")},
	}
	g := scan.GraphOf(projects)
	return Build(projects, g), g
}

func paths(doc Graph) []string {
	var out []string
	for _, p := range doc.Projects {
		out = append(out, p.Path)
	}
	return out
}

func TestAroundSelectsUpstreamsAndAllDownstreams(t *testing.T) {
	doc, _ := chainDoc()
	tests := []struct {
		project string
		depth   int
		want    []string
	}{
		{"base", 0, []string{"base", "ci", "lint", "ruby", "shop"}},
		{"ruby", 0, []string{"base", "ci", "ruby", "shop"}},
		{"ci", 0, []string{"base", "ci", "lint", "ruby"}},
		{"base", 1, []string{"base", "lint", "ruby"}},
		{"x", 0, []string{"x", "y"}},
	}
	for _, tc := range tests {
		got, err := Around(doc, tc.project, tc.depth)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(paths(got), tc.want) {
			t.Errorf("Around(%s, %d) = %v, want %v", tc.project, tc.depth, paths(got), tc.want)
		}
		if got.Focus != tc.project {
			t.Errorf("focus %q", got.Focus)
		}
	}
	ruby, _ := Around(doc, "ruby", 0)
	for _, p := range ruby.Projects {
		if p.Path == "base" && !slices.Equal(p.Downstream, []string{"ruby"}) {
			t.Errorf("base's edges not restricted to the view: %v", p.Downstream)
		}
	}
	if x, _ := Around(doc, "x", 0); len(x.Cycles) != 1 {
		t.Errorf("cycle lost: %v", x.Cycles)
	}
	if _, err := Around(doc, "nope", 0); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown project: %v", err)
	}
	if _, err := Around(doc, "base", -1); err == nil {
		t.Error("negative depth accepted")
	}
}

func TestLayoutLayersByBuildOrder(t *testing.T) {
	doc, _ := chainDoc()
	pic := Layout(doc, LayoutOptions{Focus: "ruby"})
	col := map[string]int{}
	byName := map[string]Node{}
	for _, n := range pic.Nodes {
		col[n.Name] = n.Layer
		byName[n.Name] = n
	}
	// External images first, then build order.
	want := map[string]int{"debian:12": 0, "alpine:3": 0, "base": 1, "other": 1, "ruby": 2, "lint": 2, "leaf": 2, "shop": 3, "ci": 3}
	for name, l := range want {
		if col[name] != l {
			t.Errorf("%s in column %d, want %d", name, col[name], l)
		}
	}
	if !byName["x"].Cycle || !byName["y"].Cycle || byName["base"].Cycle {
		t.Errorf("cycle marks: x %v y %v base %v", byName["x"].Cycle, byName["y"].Cycle, byName["base"].Cycle)
	}
	if !byName["ruby"].Focus || !byName["debian:12"].External || pic.Projects != 9 {
		t.Errorf("focus/external/projects: %+v %+v %d", byName["ruby"], byName["debian:12"], pic.Projects)
	}
	// No two boxes overlap, and every box is inside the picture.
	for i, a := range pic.Nodes {
		if a.X < 0 || a.Y < 0 || a.X+a.W > pic.Width || a.Y+a.H > pic.Height {
			t.Errorf("%s outside the picture: %+v in %dx%d", a.Name, a, pic.Width, pic.Height)
		}
		for _, b := range pic.Nodes[i+1:] {
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("%s and %s overlap", a.Name, b.Name)
			}
		}
	}
	// Deterministic.
	if again := Layout(doc, LayoutOptions{Focus: "ruby"}); !slices.Equal(again.Nodes, pic.Nodes) {
		t.Error("layout differs between runs")
	}
}

func TestSVGIsWellFormedAndNamesEveryNode(t *testing.T) {
	doc, _ := chainDoc()
	var buf bytes.Buffer
	if err := Write(&buf, "svg", doc); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	projects, images, cycles := map[string]bool{}, map[string]bool{}, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "data-project":
					projects[a.Value] = true
				case "data-image":
					images[a.Value] = true
				case "class":
					if strings.Contains(a.Value, "dg-node dg-cycle") {
						cycles++
					}
				}
			}
		}
	}
	if len(projects) != 9 || !images["debian:12"] || !images["alpine:3"] || cycles != 2 {
		t.Errorf("projects %v images %v cycle nodes %d", projects, images, cycles)
	}
	if !strings.Contains(buf.String(), "↻ x") {
		t.Error("a cycle is marked by colour only")
	}
}

type fakeHistory map[int64][]time.Duration

func (f fakeHistory) SuccessfulDurations(_ context.Context, id int64, _ string, n int) ([]time.Duration, error) {
	if id < 0 {
		return nil, errors.New("boom")
	}
	d := f[id]
	return d[:min(n, len(d))], nil
}

func TestEstimateFollowsTheCriticalPath(t *testing.T) {
	_, g := chainDoc()
	m := time.Minute
	typical, failed := FetchDurations(context.Background(), fakeHistory{
		1: {10 * m, 2 * m, 4 * m, 100 * m}, // median of the last 3: 4m
		2: {5 * m}, 3: {m, 3 * m}, 4: {20 * m},
	}, []HistoryTarget{{"base", 1, "main"}, {"ruby", 2, "main"}, {"lint", 3, "main"}, {"ci", 4, "main"}, {"shop", 5, "main"}, {"bad", -1, "main"}}, 2)
	if typical["base"] != 4*m || typical["lint"] != 2*m || failed["bad"] == nil || len(failed) != 1 {
		t.Fatalf("typical %v failed %v", typical, failed)
	}
	est := EstimateRebuild(g, "base", typical)
	// base 4 → ruby 5 → ci 20 = 29 beats base → lint 2 → ci; shop has no history.
	if est.Wall != 29*m || !slices.Equal(est.CriticalPath, []string{"base", "ruby", "ci"}) {
		t.Errorf("wall %s path %v", est.Wall, est.CriticalPath)
	}
	if est.Total != 31*m || !slices.Equal(est.NoHistory, []string{"shop"}) || est.Members() != 5 {
		t.Errorf("total %s no history %v members %d", est.Total, est.NoHistory, est.Members())
	}
	var buf bytes.Buffer
	if err := WriteEstimate(&buf, est); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wave 0: base\n", "wave 1: lint ruby\n", "29m00s wall time (critical path base → ruby → ci)", "31m00s of pipelines in total, for 5 projects", "no history (counted as 0): shop"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("estimate lacks %q:\n%s", want, buf.String())
		}
	}
}
