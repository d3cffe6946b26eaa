package scan

import (
	"errors"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Project is one GitLab project as the last scan saw it: what a Store keeps
// between scans, and what the graph, the reports and the dashboard are
// built from.
type Project struct {
	ID             int64  // GitLab's project id: stable across renames and transfers
	Path           string // path_with_namespace
	DefaultBranch  string
	RegistryPrefix string // container_registry_image_prefix
	WebURL         string
	// Visibility is GitLab's: public, internal or private ("" before a
	// scan recorded it). What depsd shows beside another project's
	// commit follows it (the chain's commit status names only projects
	// every viewer of that commit may see).
	Visibility string
	// HeadCommit identifies the dependency files last read from the default
	// branch: a digest of their blob ids ("blobs:…", see filesDigest), not a
	// commit.
	HeadCommit string
	// LastActivity is GitLab's last_activity_at, a cheap change signal for
	// incremental scans.
	LastActivity time.Time
	// HeadCheckedAt is when the files were last confirmed with GitLab.
	HeadCheckedAt time.Time
	// Files are the dependency files as last read (the
	// Containerfile or Dockerfile found, and .gitlab-deps), kept so that a
	// rescan re-analyses them against the current set of projects without
	// fetching them again. SearchedFiles are the candidate names that were
	// looked for: if the configuration changes them, the files are refetched.
	Files         []File
	SearchedFiles []string
	File          string // the dependency file analysed (Containerfile, Dockerfile); empty if none
	Dependencies  []deps.Dependency
	// Built are the images File's built stage is FROM
	// (deps.FileAnalysis.Built), set by Analyze: what the project's image
	// is judged against when depsd verifies it (a COPY --from stage's
	// image is not its base). Nil when there is none: no Containerfile,
	// one that does not parse, a built stage FROM scratch.
	Built    []string
	Warnings []deps.Warning
	// ScannedAt is when a scan last read the project's files (a scan that
	// finds the project unchanged leaves it).
	ScannedAt time.Time
	// PipelineIdent is how the project's pipelines carry depsd's action
	// id (chain.PipelineIdent: variables, inputs, none), as stored; in a
	// scan's result "" leaves the stored one as it is (see identify).
	PipelineIdent string
	// Refs are the project's nodes besides its default branch (whose
	// files and dependencies are the fields above): each followed branch
	// and its release tags, as `refs:` in depsd.yaml says
	// (docs/design/nodes.md). Sorted by node key.
	Refs []Ref
	// RefsRule names the rule Refs were read by (its branches and tags);
	// empty when none applies.
	RefsRule string
}

// Ref is one node of a project other than its default branch: a followed
// branch, or the project's release tags (read at the newest release).
type Ref struct {
	Node string        // its key: path@branch or path@tags
	Kind deps.NodeKind // deps.NodeBranch or deps.NodeTags
	// Ref is the branch, or the newest release tag.
	Ref string
	// HeadCommit, Files, File, Dependencies, Built and Warnings are as a
	// Project's, for this ref.
	HeadCommit   string
	Files        []File
	File         string
	Dependencies []deps.Dependency
	Built        []string
	Warnings     []deps.Warning
}

// At is the project as seen at one of its nodes: Path the node's key,
// the files, dependencies and warnings that node's ref has, and Refs
// empty. ok is false for a node the project does not have.
func (p Project) At(node string) (Project, bool) {
	if node == p.Path {
		return p, true
	}
	for _, r := range p.Refs {
		if r.Node == node {
			q := p
			q.Path, q.HeadCommit, q.Files, q.File = r.Node, r.HeadCommit, r.Files, r.File
			q.Dependencies, q.Built, q.Warnings, q.Refs = r.Dependencies, r.Built, r.Warnings, nil
			return q, true
		}
	}
	return Project{}, false
}

// Nodes are the keys of the project's nodes: its default branch first.
func (p Project) Nodes() []string {
	out := []string{p.Path}
	for _, r := range p.Refs {
		out = append(out, r.Node)
	}
	return out
}

// File is one file of a project's repository, as read.
type File struct {
	Name    string // path in the repository
	Content []byte
}

// Meta summarises one scan, as `depsd scan` prints it.
type Meta struct {
	StartedAt, FinishedAt time.Time
	Projects              int   // projects in scope
	Edges                 int   // project → project dependencies
	External              int   // distinct external images
	Warnings              int   // warnings in dependency files
	Cycles                int   // dependency cycles found
	Requests              int64 // GitLab API requests made
	// Replaces is the StartedAt of the last stored scan when this one
	// began (zero when there was none). With OnlyIfLatest, a Store refuses
	// the result with ErrConflict if another scan was stored since: an
	// older, slower scan must not roll back a newer one.
	Replaces     time.Time
	OnlyIfLatest bool
}

// ErrConflict: another scan was stored while this one ran; its result is
// newer and stands.
var ErrConflict = errors.New("a newer scan was stored while this one ran")

// ErrNotFound: no project is stored at the path asked for.
var ErrNotFound = errors.New("project not found")

// GraphOf builds the dependency graph of projects: every node of every
// project (its default branch, each followed ref) is a node of the graph,
// and every dependency naming a node of another, or another node of the
// same project, is an edge. A dependency on a project outside the set
// (out of scope, removed) adds nothing: depsd could never trigger or hear
// from such a project. Nor does a node naming itself (FROM its own
// image): that would be a cycle of one, reported as a warning by Analyze
// instead. store.Store.Graph applies the same rules.
func GraphOf(projects []Project) *deps.Graph {
	g := deps.NewGraph()
	for _, p := range projects {
		for _, n := range p.Nodes() {
			g.AddProject(n)
		}
	}
	edges := func(node string, ds []deps.Dependency) {
		for _, d := range ds {
			if up := d.UpstreamNode(); up != "" && up != node && g.Has(up) {
				if d.Pinned {
					g.AddPinnedEdge(up, node)
				} else {
					g.AddEdge(up, node)
				}
			}
		}
	}
	for _, p := range projects {
		edges(p.Path, p.Dependencies)
		for _, r := range p.Refs {
			edges(r.Node, r.Dependencies)
		}
	}
	return g
}
