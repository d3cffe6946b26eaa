package chain

import (
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// A member, an action and a chain's root are nodes: a project at a ref
// (deps.NodeKey: "lang/ruby" for its default branch, "lang/ruby@bookworm",
// "infra/base@tags"; docs/design/nodes.md). These say which ref a node's
// pipelines run on, and which node a pipeline event is about.

// buildRef is the ref a pipeline of node runs on, given its project p:
// the default branch, the followed branch, or for the release tags the
// newest release tag (rebuild: latest-tag, the default) or the default
// branch (rebuild: branch). ok is false for a node p no longer has.
func buildRef(node string, p Project, rules deps.RefRules) (string, bool) {
	path, kind, branch := deps.ParseNode(node)
	switch kind {
	case deps.NodeBranch:
		_, ok := p.Refs[node]
		return branch, ok
	case deps.NodeTags:
		tag, ok := p.Refs[node]
		if rule, _ := rules.For(path); ok && rule.Rebuild == deps.RebuildBranch {
			return p.DefaultBranch, true
		}
		return tag, ok
	}
	return p.DefaultBranch, true
}

// eventNode is the node a pipeline of project p on ref (a branch, or a
// tag when tag is set) is about: the default branch, a followed branch, or
// the release tags when the tag is a release; ok is false for a ref no
// node follows (a feature branch, any other tag).
func eventNode(p Project, ref string, tag bool, rules deps.RefRules) (string, bool) {
	if tag {
		ref = strings.TrimPrefix(ref, "refs/tags/")
		node := deps.NodeKey(p.Path, deps.NodeTags, "")
		rule, _ := rules.For(p.Path)
		if _, ok := p.Refs[node]; ok && rule.FollowsTag(ref) {
			return node, true
		}
		return "", false
	}
	ref = strings.TrimPrefix(ref, "refs/heads/")
	if ref == p.DefaultBranch {
		return p.Path, true
	}
	node := deps.NodeKey(p.Path, deps.NodeBranch, ref)
	if _, ok := p.Refs[node]; ok {
		return node, true
	}
	return "", false
}

// followsBranch reports whether a push to branch of p changes a node's
// files: its default branch, or a branch it follows.
func followsBranch(p Project, branch string) bool {
	_, ok := eventNode(p, branch, false, nil)
	return ok
}
