package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// TestGraphShowsPins: an edge whose downstream pins its upstream by
// digest is drawn apart in every format (a marker in text, its own edge
// style in DOT, Mermaid and SVG) and named with its digest and tag in
// JSON; an unpinned edge is not.
func TestGraphShowsPins(t *testing.T) {
	const pin = "sha256:1f38c0d0a1f2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
	projects := []scan.Project{
		{Path: "g/base", DefaultBranch: "main"},
		{Path: "g/ruby", DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Line: 1,
			Image: "r/g/base:latest", Repository: "r/g/base", Tag: "latest", Project: "g/base"}}},
		{Path: "g/app", DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Line: 2, Ref: "${RUBY}",
			Image: "r/g/ruby:3@" + pin, Repository: "r/g/ruby", Tag: "3", Digest: pin, Pinned: true, Project: "g/ruby"}}},
	}
	doc := Build(projects, scan.GraphOf(projects))
	out := map[string]string{}
	for _, f := range Formats() {
		var b bytes.Buffer
		if err := Write(&b, f, doc); err != nil {
			t.Fatal(err)
		}
		out[f] = b.String()
	}
	if !strings.Contains(out["text"], "g/ruby (pinned sha256:1f38c0d0a1f2, tag 3)") || strings.Contains(out["text"], "g/base (pinned") {
		t.Errorf("text does not mark the pin of g/ruby alone:\n%s", out["text"])
	}
	if !strings.Contains(out["dot"], `"g/ruby" -> "g/app" [style=bold, label="pinned"];`) || !strings.Contains(out["dot"], `"g/base" -> "g/ruby";`) {
		t.Errorf("dot:\n%s", out["dot"])
	}
	if !strings.Contains(out["mermaid"], "==>|pinned|") || strings.Count(out["mermaid"], "==>") != 1 {
		t.Errorf("mermaid:\n%s", out["mermaid"])
	}
	if strings.Count(out["svg"], `class="dg-edge dg-pinned"`) != 1 || !strings.Contains(out["svg"], "pinned") {
		t.Errorf("svg has not one pinned edge:\n%s", out["svg"])
	}
	var back Graph
	if err := json.Unmarshal([]byte(out["json"]), &back); err != nil {
		t.Fatal(err)
	}
	for _, p := range back.Projects {
		if p.Path == "g/app" {
			if got := p.UpstreamPins["g/ruby"]; got.Digest != pin || got.Tag != "3" || len(p.UpstreamPins) != 1 {
				t.Errorf("g/app's pins in JSON = %+v", p.UpstreamPins)
			}
		} else if len(p.UpstreamPins) != 0 {
			t.Errorf("%s has pins %+v", p.Path, p.UpstreamPins)
		}
	}
}
