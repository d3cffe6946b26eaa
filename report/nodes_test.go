package report

import (
	"bytes"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// The fleet's nodes in every format: each ref of a project is a node, a
// project with several is named project@ref for its default branch too,
// and an edge to a node besides a default branch says how its reference
// was mapped.
func TestGraphOfNodes(t *testing.T) {
	from := func(image, project, node string, via deps.EdgeSource) []deps.Dependency {
		return []deps.Dependency{{Kind: deps.KindFrom, Image: image, Project: project, Node: node, Via: via}}
	}
	projects := []scan.Project{
		{Path: "infra/base", DefaultBranch: "main", Refs: []scan.Ref{
			{Node: "infra/base@bookworm", Kind: deps.NodeBranch, Ref: "bookworm"},
			{Node: "infra/base@tags", Kind: deps.NodeTags, Ref: "v3.2.2"}}},
		{Path: "lang/ruby", DefaultBranch: "main", Dependencies: from("r/infra/base:3", "infra/base", "infra/base@tags", deps.EdgeConfigured),
			Refs: []scan.Ref{{Node: "lang/ruby@bookworm", Kind: deps.NodeBranch, Ref: "bookworm",
				Dependencies: from("r/infra/base:bookworm", "infra/base", "infra/base@bookworm", deps.EdgeSeen)}}},
		{Path: "apps/shop", DefaultBranch: "main", Dependencies: from("r/lang/ruby:latest", "lang/ruby", "", deps.EdgeConfigured)},
	}
	doc := Build(projects, scan.GraphOf(projects))
	if len(doc.Projects) != 6 {
		t.Fatalf("%d nodes, want 6: %+v", len(doc.Projects), doc.Projects)
	}
	out := map[string]string{}
	for _, f := range []string{"text", "dot", "mermaid", "svg"} {
		var b bytes.Buffer
		if err := Write(&b, f, doc); err != nil {
			t.Fatal(err)
		}
		out[f] = b.String()
	}
	for _, want := range []string{
		"lang/ruby@main ", "infra/base@tags (configured)", "infra/base@bookworm (seen)", "lang/ruby@bookworm",
	} {
		if !strings.Contains(out["text"], want) {
			t.Errorf("text lacks %q:\n%s", want, out["text"])
		}
	}
	if !strings.Contains(out["dot"], `"infra/base@tags" -> "lang/ruby@main"`) || strings.Contains(out["dot"], `"lang/ruby" `) {
		t.Errorf("dot names the default branch of ruby by its path alone:\n%s", out["dot"])
	}
	if !strings.Contains(out["svg"], "lang/ruby@main") || !strings.Contains(out["mermaid"], "lang/ruby@main") {
		t.Error("svg or mermaid without lang/ruby@main")
	}
	// apps/shop has one node: its path alone.
	if !strings.Contains(out["text"], "apps/shop ") || strings.Contains(out["text"], "apps/shop@") {
		t.Errorf("a project with one node is not named by its path:\n%s", out["text"])
	}
}
