// Package deps is depsd's pure domain: it reads dependency declarations
// (Containerfile FROM lines, COPY --from, RUN --mount from, and .gitlab-deps
// files), maps image references to GitLab projects, and builds the
// cross-project dependency graph. It performs no I/O beyond reading a local
// directory for `depsd check`.
package deps

// Kind says how a dependency was declared.
type Kind string

// The kinds of dependency declarations depsd understands.
const (
	KindFrom       Kind = "from"        // FROM <image>
	KindCopyFrom   Kind = "copy-from"   // COPY --from=<image>
	KindMountFrom  Kind = "mount-from"  // RUN --mount=...,from=<image>
	KindGitLabDeps Kind = "gitlab-deps" // a line of .gitlab-deps
)

// Dependency is one upstream declared by one file of a project.
type Dependency struct {
	Kind Kind   `json:"kind"`
	Line int    `json:"line"`
	Ref  string `json:"ref"` // as written in the file
	// Image is the reference after ARG expansion and normalisation
	// (docker.io/library/debian:latest). Empty for gitlab-deps entries and
	// for references that could not be resolved.
	Image string `json:"image,omitempty"`
	// Repository is Image without tag or digest (host/path).
	Repository string `json:"repository,omitempty"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest,omitempty"`
	// Pinned: the reference pins its image by digest (Digest), written
	// in the reference (ruby:3@sha256:…, or ruby@sha256:… without a tag)
	// or in the default of an ARG it uses. Tag is then the tag the pin
	// came from, when it has one. A change of a pinned upstream reaches
	// the project through a merge request moving the pin (MovePins).
	Pinned bool `json:"pinned,omitempty"`
	// Project is the path of the GitLab project the dependency names, when
	// known: mapped from Repository, or written directly in .gitlab-deps.
	Project string `json:"project,omitempty"`
	// Node is the node of Project that publishes the reference
	// (NodeResolver), when it is not Project's default branch; Via says
	// how that was decided.
	Node string     `json:"node,omitempty"`
	Via  EdgeSource `json:"via,omitempty"`
	// SeenIn is the pipeline seen pushing the reference, when Via is
	// EdgeSeen.
	SeenIn int64 `json:"seen_in,omitempty"`
}

// UpstreamNode is the node the dependency names: Node, else Project's
// default branch (Project); "" for an external image.
func (d Dependency) UpstreamNode() string {
	if d.Node != "" {
		return d.Node
	}
	return d.Project
}

// Warning is a problem in a file that did not stop its analysis.
type Warning struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}
