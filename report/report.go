// Package report renders the stored dependency graph for people and
// programs: text, JSON, Graphviz DOT, Mermaid and SVG (a layered picture,
// see Layout), focused on one project with Around, and estimates what a
// rebuild costs. The CLI (`depsd graph`, `depsd rebuild --dry-run`), the
// HTTP API (/api/v1/graph) and the dashboard share it, so all say the same.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// Formats lists the names Write accepts.
func Formats() []string { return []string{"text", "json", "dot", "mermaid", "svg"} }

// Graph is the JSON document of `depsd graph --format json`.
type Graph struct {
	Projects []Project  `json:"projects"`
	Cycles   [][]string `json:"cycles"`
	// Focus is the project a view from Around is about; empty for the
	// whole graph.
	Focus string `json:"focus,omitempty"`
}

// Project is one node with its neighbours.
type Project struct {
	Path       string         `json:"path"`
	File       string         `json:"file,omitempty"`
	Upstream   []string       `json:"upstream"`
	Downstream []string       `json:"downstream"`
	External   []string       `json:"external"`
	Warnings   []deps.Warning `json:"warnings"`
}

// Build assembles the document from the stored projects and their graph.
func Build(projects []scan.Project, g *deps.Graph) Graph {
	doc := Graph{Projects: make([]Project, 0, len(projects)), Cycles: g.Cycles()}
	if doc.Cycles == nil {
		doc.Cycles = [][]string{}
	}
	for _, p := range projects {
		ext := map[string]bool{}
		for _, d := range p.Dependencies {
			if d.Project == "" && d.Image != "" {
				ext[d.Image] = true
			}
		}
		warnings := p.Warnings
		if warnings == nil {
			warnings = []deps.Warning{}
		}
		doc.Projects = append(doc.Projects, Project{
			Path: p.Path, File: p.File,
			Upstream: nonNil(g.Upstream(p.Path)), Downstream: nonNil(g.Downstream(p.Path)),
			External: sortedKeys(ext), Warnings: warnings,
		})
	}
	sort.Slice(doc.Projects, func(i, j int) bool { return doc.Projects[i].Path < doc.Projects[j].Path })
	return doc
}

// Write renders doc in format (one of Formats).
func Write(w io.Writer, format string, doc Graph) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	case "text":
		return writeText(w, doc)
	case "dot":
		return writeDOT(w, doc)
	case "mermaid":
		return writeMermaid(w, doc)
	case "svg":
		title := "depsd dependency graph"
		if doc.Focus != "" {
			title += " around " + doc.Focus
		}
		return WriteSVG(w, Layout(doc, LayoutOptions{Focus: doc.Focus}), SVGOptions{Title: title})
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats(), ", "))
}

func writeText(w io.Writer, doc Graph) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tUPSTREAM\tDOWNSTREAM\tEXTERNAL\tWARNINGS")
	for _, p := range doc.Projects {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", p.Path, list(p.Upstream), list(p.Downstream), list(p.External), len(p.Warnings))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range doc.Cycles {
		if _, err := fmt.Fprintf(w, "cycle (never followed): %s\n", strings.Join(c, " → ")); err != nil {
			return err
		}
	}
	return nil
}

// writeDOT draws edges upstream → downstream, external images as boxes.
func writeDOT(w io.Writer, doc Graph) error {
	var b strings.Builder
	b.WriteString("digraph depsd {\n  rankdir=LR;\n  node [shape=ellipse];\n")
	ext := map[string]bool{}
	for _, p := range doc.Projects {
		fmt.Fprintf(&b, "  %q;\n", p.Path)
		for _, d := range p.Downstream {
			fmt.Fprintf(&b, "  %q -> %q;\n", p.Path, d)
		}
		for _, e := range p.External {
			ext[e] = true
			fmt.Fprintf(&b, "  %q -> %q [style=dashed];\n", e, p.Path)
		}
	}
	for _, e := range sortedKeys(ext) {
		fmt.Fprintf(&b, "  %q [shape=box];\n", e)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMermaid draws a flowchart; node ids are indices because Mermaid ids
// cannot hold '/' or ':'.
func writeMermaid(w io.Writer, doc Graph) error {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := map[string]string{}
	id := func(name string, external bool) string {
		if v, ok := ids[name]; ok {
			return v
		}
		v := fmt.Sprintf("n%d", len(ids))
		ids[name] = v
		if external {
			fmt.Fprintf(&b, "  %s[%q]\n", v, name)
		} else {
			fmt.Fprintf(&b, "  %s([%q])\n", v, name)
		}
		return v
	}
	for _, p := range doc.Projects {
		id(p.Path, false)
	}
	for _, p := range doc.Projects {
		for _, d := range p.Downstream {
			fmt.Fprintf(&b, "  %s --> %s\n", id(p.Path, false), id(d, false))
		}
		for _, e := range p.External {
			fmt.Fprintf(&b, "  %s -.-> %s\n", id(e, true), id(p.Path, false))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
