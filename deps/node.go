package deps

import "strings"

// A node of the graph is one project at one ref: the unit a chain
// rebuilds and an image is published by (docs/design/nodes.md). Its key is
// a string, so that the graph, chains, actions and stored rows keep
// naming members by one string:
//
//   - the default branch: the project's path ("lang/ruby"), as before
//     nodes existed, so that a state written then needs no migration;
//   - another followed branch: "lang/ruby@bookworm";
//   - the release tags: "infra/base@tags".
//
// A project path never holds '@', so the first '@' splits a key.

// NodeKind says which ref a node follows.
type NodeKind int

const (
	// NodeDefault is a project's default branch.
	NodeDefault NodeKind = iota
	// NodeBranch is a followed branch other than the default one.
	NodeBranch
	// NodeTags is a project's release tags (the latest one matching its
	// tags glob).
	NodeTags
)

// TagsRef is what a key says after '@' for the release-tag node.
const TagsRef = "tags"

// NodeKey is the key of project path at ref: the path for its default
// branch, path@ref for another branch, path@tags for its release tags
// (ref is then ignored).
func NodeKey(path string, kind NodeKind, ref string) string {
	switch kind {
	case NodeBranch:
		return path + "@" + ref
	case NodeTags:
		return path + "@" + TagsRef
	}
	return path
}

// ParseNode splits a key into its project path and what it follows:
// the branch of a NodeBranch, "" for the default branch (the project's
// own default, which the key does not name) and for the release tags.
func ParseNode(key string) (path string, kind NodeKind, branch string) {
	path, ref, ok := strings.Cut(key, "@")
	switch {
	case !ok:
		return key, NodeDefault, ""
	case ref == TagsRef:
		return path, NodeTags, ""
	}
	return path, NodeBranch, ref
}

// NodeProject is the project path of a key.
func NodeProject(key string) string {
	path, _, _ := strings.Cut(key, "@")
	return path
}

// NodeLabel is how views name a node: the key, except that the default
// branch of a project with several nodes is named by its branch too
// ("lang/ruby@main" beside "lang/ruby@bookworm"). several says whether
// the project has more than one node; defaultBranch is its default
// branch.
func NodeLabel(key string, several bool, defaultBranch string) string {
	if several && !strings.Contains(key, "@") && defaultBranch != "" {
		return key + "@" + defaultBranch
	}
	return key
}
