package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

func sample() Graph {
	projects := []scan.Project{
		{Path: "g/base", File: "Containerfile", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "docker.io/library/debian:12", Repository: "docker.io/library/debian"}}},
		{Path: "g/app", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "r/g/base:1", Project: "g/base"}},
			Warnings: []deps.Warning{{File: "Containerfile", Line: 3, Message: "ARG X has no default value"}}},
		{Path: "g/x", Dependencies: []deps.Dependency{{Kind: deps.KindGitLabDeps, Project: "g/y"}}},
		{Path: "g/y", Dependencies: []deps.Dependency{{Kind: deps.KindGitLabDeps, Project: "g/x"}}},
	}
	return Build(projects, scan.GraphOf(projects))
}

func TestBuildJSONShape(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "json", sample()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Projects []struct {
			Path       string         `json:"path"`
			Upstream   []string       `json:"upstream"`
			Downstream []string       `json:"downstream"`
			External   []string       `json:"external"`
			Warnings   []deps.Warning `json:"warnings"`
		} `json:"projects"`
		Cycles [][]string `json:"cycles"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Projects) != 4 || doc.Projects[0].Path != "g/app" || doc.Projects[1].Path != "g/base" {
		t.Fatalf("projects not sorted by path: %+v", doc.Projects)
	}
	base := doc.Projects[1]
	if strings.Join(base.Downstream, ",") != "g/app" || strings.Join(base.External, ",") != "docker.io/library/debian:12" || base.Upstream == nil || base.Warnings == nil {
		t.Errorf("base: %+v (lists must be [] not null)", base)
	}
	if len(doc.Projects[0].Warnings) != 1 {
		t.Errorf("app warnings: %+v", doc.Projects[0].Warnings)
	}
	if len(doc.Cycles) != 1 || strings.Join(doc.Cycles[0], ",") != "g/x,g/y,g/x" {
		t.Errorf("cycles: %v", doc.Cycles)
	}
}

func TestOtherFormats(t *testing.T) {
	tests := map[string][]string{
		"text":    {"g/base", "docker.io/library/debian:12", "cycle (never followed): g/x → g/y → g/x"},
		"dot":     {"digraph depsd", `"g/base" -> "g/app";`, `"docker.io/library/debian:12" [shape=box];`},
		"mermaid": {"flowchart LR", `(["g/base"])`, "-.->"},
	}
	for format, wants := range tests {
		var buf bytes.Buffer
		if err := Write(&buf, format, sample()); err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s output lacks %q:\n%s", format, w, buf.String())
			}
		}
	}
	if err := Write(&bytes.Buffer{}, "yaml", sample()); err == nil {
		t.Error("unknown format accepted")
	}
}
