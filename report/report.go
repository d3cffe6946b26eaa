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

// Project is one node with its neighbours: a project's default branch,
// or another of its refs (docs/design/nodes.md).
type Project struct {
	// Path is the node's key: the project's path for its default branch,
	// project@branch, project@tags.
	Path string `json:"path"`
	// Label is how the node is shown: the key, or project@branch for the
	// default branch of a project with several nodes (deps.NodeLabel).
	Label string `json:"label,omitempty"`
	// Ref is the branch the node follows, or its newest release tag.
	Ref        string   `json:"ref,omitempty"`
	File       string   `json:"file,omitempty"`
	Upstream   []string `json:"upstream"`
	Downstream []string `json:"downstream"`
	// UpstreamVia says, for each upstream, how the node's reference was
	// mapped to that upstream node: configured (a publish template of
	// refs: or the default :latest), seen (a pipeline was seen pushing
	// it), default (no node claims it: the default branch's).
	UpstreamVia map[string]deps.EdgeSource `json:"upstream_via,omitempty"`
	// UpstreamSeenIn is, for an upstream mapped by what depsd saw, the
	// pipeline seen pushing the reference.
	UpstreamSeenIn map[string]int64 `json:"upstream_seen_in,omitempty"`
	// UpstreamPins are the upstreams the node pins by digest
	// (deps.Dependency.Pinned): a change of one reaches the node through
	// a merge request that moves the pin (docs/chains.md).
	UpstreamPins map[string]Pin `json:"upstream_pins,omitempty"`
	External     []string       `json:"external"`
	Warnings     []deps.Warning `json:"warnings"`
}

// Pin is the digest a node pins an upstream to, and the tag the pin
// came from (empty for a digest alone).
type Pin struct {
	Digest string `json:"digest"`
	Tag    string `json:"tag,omitempty"`
}

// ShortDigest is a digest as views print it: the algorithm and 12 hex
// digits.
func ShortDigest(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return d
}

// Build assembles the document from the stored projects and their graph:
// one entry per node.
func Build(projects []scan.Project, g *deps.Graph) Graph {
	doc := Graph{Projects: make([]Project, 0, len(projects)), Cycles: g.Cycles()}
	if doc.Cycles == nil {
		doc.Cycles = [][]string{}
	}
	labels := Labels(projects)
	node := func(key, ref, file string, ds []deps.Dependency, warnings []deps.Warning) Project {
		ext := map[string]bool{}
		via := map[string]deps.EdgeSource{}
		var seenIn map[string]int64
		var pins map[string]Pin
		for _, d := range ds {
			if d.Project == "" && d.Image != "" {
				ext[d.Image] = true
			}
			if up := d.UpstreamNode(); up != "" && d.Pinned && g.Pinned(up, key) {
				if pins == nil {
					pins = map[string]Pin{}
				}
				pins[up] = Pin{Digest: d.Digest, Tag: d.Tag}
			}
			if up := d.UpstreamNode(); up != "" && d.Via != "" && g.Has(up) {
				via[up] = d.Via
				if d.SeenIn != 0 {
					if seenIn == nil {
						seenIn = map[string]int64{}
					}
					seenIn[up] = d.SeenIn
				}
			}
		}
		if len(via) == 0 {
			via = nil
		}
		if warnings == nil {
			warnings = []deps.Warning{}
		}
		p := Project{
			Path: key, Ref: ref, File: file,
			Upstream: nonNil(g.Upstream(key)), Downstream: nonNil(g.Downstream(key)),
			UpstreamVia: via, UpstreamSeenIn: seenIn, UpstreamPins: pins, External: sortedKeys(ext), Warnings: warnings,
		}
		if l := labels[key]; l != key {
			p.Label = l
		}
		return p
	}
	for _, p := range projects {
		doc.Projects = append(doc.Projects, node(p.Path, "", p.File, p.Dependencies, p.Warnings))
		for _, r := range p.Refs {
			doc.Projects = append(doc.Projects, node(r.Node, r.Ref, r.File, r.Dependencies, r.Warnings))
		}
	}
	sort.Slice(doc.Projects, func(i, j int) bool { return doc.Projects[i].Path < doc.Projects[j].Path })
	return doc
}

// Labels are how views name the nodes of projects: by key, except that
// the default branch of a project with several nodes is named
// project@branch (deps.NodeLabel).
func Labels(projects []scan.Project) map[string]string {
	out := make(map[string]string, len(projects))
	for _, p := range projects {
		out[p.Path] = deps.NodeLabel(p.Path, len(p.Refs) > 0, p.DefaultBranch)
		for _, r := range p.Refs {
			out[r.Node] = r.Node
		}
	}
	return out
}

// names maps each node's key to how it is shown (Project.Name).
func (doc Graph) names() func(key string) string {
	m := make(map[string]string, len(doc.Projects))
	for _, p := range doc.Projects {
		if p.Label != "" {
			m[p.Path] = p.Label
		}
	}
	return func(key string) string {
		if l, ok := m[key]; ok {
			return l
		}
		return key
	}
}

// pinned reports whether down pins up by digest.
func (doc Graph) pinned(up, down string) bool {
	for _, p := range doc.Projects {
		if p.Path == down {
			_, ok := p.UpstreamPins[up]
			return ok
		}
	}
	return false
}

// Name is how p is shown: its Label, else its key.
func (p Project) Name() string {
	if p.Label != "" {
		return p.Label
	}
	return p.Path
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
	name := doc.names()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tUPSTREAM\tDOWNSTREAM\tEXTERNAL\tWARNINGS")
	for _, p := range doc.Projects {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", p.Name(), upstreams(p, name), list(mapped(p.Downstream, name)), list(p.External), len(p.Warnings))
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
	name := doc.names()
	var b strings.Builder
	b.WriteString("digraph depsd {\n  rankdir=LR;\n  node [shape=ellipse];\n")
	ext := map[string]bool{}
	for _, p := range doc.Projects {
		fmt.Fprintf(&b, "  %q;\n", p.Name())
		for _, d := range p.Downstream {
			if doc.pinned(p.Path, d) {
				fmt.Fprintf(&b, "  %q -> %q [style=bold, label=\"pinned\"];\n", p.Name(), name(d))
				continue
			}
			fmt.Fprintf(&b, "  %q -> %q;\n", p.Name(), name(d))
		}
		for _, e := range p.External {
			ext[e] = true
			fmt.Fprintf(&b, "  %q -> %q [style=dashed];\n", e, p.Name())
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
	name := doc.names()
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
		id(p.Name(), false)
	}
	for _, p := range doc.Projects {
		for _, d := range p.Downstream {
			arrow := "-->"
			if doc.pinned(p.Path, d) {
				arrow = "==>|pinned|"
			}
			fmt.Fprintf(&b, "  %s %s %s\n", id(p.Name(), false), arrow, id(name(d), false))
		}
		for _, e := range p.External {
			fmt.Fprintf(&b, "  %s -.-> %s\n", id(e, true), id(p.Name(), false))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// upstreams lists p's upstreams, each saying how its reference was mapped
// when that is not the only way it could be: a node besides a default
// branch, or a reference no node claims.
func upstreams(p Project, name func(string) string) string {
	var out []string
	for _, u := range p.Upstream {
		s := name(u)
		switch v := p.UpstreamVia[u]; {
		case v == deps.EdgeSeen && p.UpstreamSeenIn[u] != 0:
			s += fmt.Sprintf(" (seen at pipeline %d)", p.UpstreamSeenIn[u])
		case v == deps.EdgeSeen || v != "" && strings.Contains(s, "@"):
			s += " (" + string(v) + ")"
		}
		if pin, ok := p.UpstreamPins[u]; ok {
			s += " (pinned " + ShortDigest(pin.Digest)
			if pin.Tag != "" {
				s += ", tag " + pin.Tag
			}
			s += ")"
		}
		out = append(out, s)
	}
	return list(out)
}

// mapped is keys as name shows them.
func mapped(keys []string, name func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = name(k)
	}
	return out
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
