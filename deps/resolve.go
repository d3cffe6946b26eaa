package deps

import (
	"fmt"
	"slices"
	"strings"
)

// ProjectRefs is what mapping images to nodes needs of one project: where
// its images live, its default branch, the rule that applies to it, and
// the refs that exist now.
type ProjectRefs struct {
	Path           string
	RegistryPrefix string // host/path; empty: no container registry
	DefaultBranch  string
	Rule           RefRule
	// Branches are its followed branches other than the default one that
	// exist (RefRule.FollowsBranch of the repository's branches).
	Branches []string
	// Release is its newest release tag; nil: it has none (or releases
	// are not tags), and it has no release-tag node.
	Release *Release
}

// Nodes are the project's node keys: the default branch, each followed
// branch, and its release tags when it has one.
func (p ProjectRefs) Nodes() []string {
	out := []string{NodeKey(p.Path, NodeDefault, "")}
	for _, b := range p.Branches {
		out = append(out, NodeKey(p.Path, NodeBranch, b))
	}
	if p.Release != nil {
		out = append(out, NodeKey(p.Path, NodeTags, ""))
	}
	return out
}

// EdgeSource says how a reference was mapped to the node that publishes
// it.
type EdgeSource string

const (
	// EdgeConfigured: a publish template of the node gives the reference.
	EdgeConfigured EdgeSource = "configured"
	// EdgeSeen: the node's pipeline was seen pushing the reference.
	EdgeSeen EdgeSource = "seen"
	// EdgeDefault: no node claims the reference: it is the default
	// branch's, as every reference was before nodes existed.
	EdgeDefault EdgeSource = "default"
)

// NodeResolver maps an image reference of a project to the node of that
// project that publishes it (docs/design/nodes.md, "Edges"). It is
// read-only once built and safe for concurrent use.
type NodeResolver struct {
	projects map[string]*projectPatterns
	seen     map[string]Seen // by image
}

// Seen is a publication depsd saw: the node whose pipeline pushed an
// image (a tag downstreams name).
type Seen struct {
	Node       string
	PipelineID int64
}

type projectPatterns struct {
	refs     ProjectRefs
	patterns []nodePattern // in node order
}

type nodePattern struct {
	node     string
	patterns []PublishPattern
}

// NewNodeResolver builds a resolver over projects; seen are the
// publications depsd saw (image → node key). A template that cannot be
// compiled for a project is an error naming both; the project's other
// templates still count.
func NewNodeResolver(projects []ProjectRefs, seen map[string]Seen) (*NodeResolver, []error) {
	r := &NodeResolver{projects: make(map[string]*projectPatterns, len(projects)), seen: seen}
	var errs []error
	for _, p := range projects {
		pp := &projectPatterns{refs: p}
		for _, node := range p.Nodes() {
			_, kind, branch := ParseNode(node)
			np := nodePattern{node: node}
			for _, tmpl := range p.Rule.Templates(kind, branch, p.DefaultBranch) {
				pat, err := CompilePublish(tmpl, p.RegistryPrefix, kind, branch)
				if err != nil {
					errs = append(errs, &TemplateError{Project: p.Path, Node: node, Template: tmpl, Err: err})
					continue
				}
				np.patterns = append(np.patterns, pat)
			}
			pp.patterns = append(pp.patterns, np)
		}
		r.projects[p.Path] = pp
	}
	return r, errs
}

// Node is the node of project that publishes image (normalised
// host/path:tag, with or without a digest), and how that was decided. A
// project the resolver does not know is its own default-branch node.
func (r *NodeResolver) Node(project, image string) (string, EdgeSource) {
	n, via, _ := r.NodeSeen(project, image)
	return n, via
}

// NodeSeen is Node, and the pipeline seen pushing image when that decided.
func (r *NodeResolver) NodeSeen(project, image string) (string, EdgeSource, int64) {
	pp, ok := r.projects[project]
	if !ok {
		return project, EdgeDefault, 0
	}
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if _, _, tagged := cutTag(ref); tagged {
		for _, np := range pp.patterns {
			if slices.ContainsFunc(np.patterns, func(p PublishPattern) bool { return p.Matches(ref) }) {
				return np.node, EdgeConfigured, 0
			}
		}
		if sp, ok := r.seen[ref]; ok && slices.Contains(pp.refs.Nodes(), sp.Node) {
			return sp.Node, EdgeSeen, sp.PipelineID
		}
	}
	return project, EdgeDefault, 0
}

// TemplateError is a publish template that cannot be used for a node.
type TemplateError struct {
	Project, Node, Template string
	Err                     error
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("refs: publish %q of %s: %v", e.Template, e.Node, e.Err)
}

func (e *TemplateError) Unwrap() error { return e.Err }

// Conflicts lists the references two nodes of one project both claim by
// their templates, among refs (each host/path:tag): a configuration
// warning for `depsd check`; Node picks the first node in key order.
func (r *NodeResolver) Conflicts(project string, refs []string) []string {
	pp, ok := r.projects[project]
	if !ok {
		return nil
	}
	var out []string
	for _, ref := range refs {
		var claim []string
		for _, np := range pp.patterns {
			if slices.ContainsFunc(np.patterns, func(p PublishPattern) bool { return p.Matches(ref) }) {
				claim = append(claim, np.node)
			}
		}
		if len(claim) > 1 {
			out = append(out, fmt.Sprintf("%s is published by %s: depsd takes %s", ref, strings.Join(claim, " and "), claim[0]))
		}
	}
	return out
}
