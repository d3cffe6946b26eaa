package scan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// refSignature names what a rule makes a scan read of a project: its
// branch wildcards and its tags glob. A project whose files provably did
// not change keeps its stored refs only while it is the same.
func refSignature(r deps.RefRule, ok bool) string {
	if !ok || len(r.Branches) == 0 && r.Tags == "" {
		return ""
	}
	return fmt.Sprintf("branches=%s;tags=%s", strings.Join(r.Branches, ","), r.Tags)
}

// tagSearch is GitLab's tag filter for a glob: its literal start,
// anchored (^v for v*); empty when the glob starts with a wildcard.
func tagSearch(glob string) string {
	prefix, _, _ := strings.Cut(glob, "*")
	if prefix == "" {
		return ""
	}
	return "^" + prefix
}

// refsRead is what reading a project's refs gave.
type refsRead struct {
	refs  []Ref
	read  int
	extra int // requests beyond the default branch's: listings and trees
}

// readRefs lists the branches and release tags of p that rule follows and
// reads each one's dependency files (REST: a tree listing each, blobs by
// id through the cache). A ref that vanished between the listing and the
// read is left out; one that cannot be read keeps what prev held for it,
// with a warning.
func readRefs(ctx context.Context, gl GitLab, blobs *blobCache, p gitlab.Project, rule deps.RefRule, prev []Ref, containerfiles, names []string) (refsRead, error) {
	var out refsRead
	type want struct {
		kind deps.NodeKind
		ref  string
	}
	var wants []want
	if len(rule.Branches) > 0 {
		branches, err := gl.BranchNames(ctx, p.ID, "")
		out.extra++
		if err != nil {
			return out, err
		}
		slices.Sort(branches)
		for _, b := range branches {
			if b != p.DefaultBranch && rule.FollowsBranch(b) && !(b == deps.TagsRef && rule.Tags != "") {
				wants = append(wants, want{deps.NodeBranch, b})
			}
		}
	}
	if rule.Tags != "" {
		tags, err := gl.NewestTagNames(ctx, p.ID, tagSearch(rule.Tags))
		out.extra++
		if err != nil {
			return out, err
		}
		if rel, ok := deps.LatestRelease(tags, rule.Tags); ok {
			wants = append(wants, want{deps.NodeTags, rel.Tag})
		}
	}
	for _, w := range wants {
		node := deps.NodeKey(p.Path, w.kind, w.ref)
		at := p
		at.DefaultBranch = w.ref
		r := readFiles(ctx, gl, blobs, at, containerfiles, names, false)
		out.extra++
		out.read += r.read
		ref := Ref{Node: node, Kind: w.kind, Ref: w.ref}
		switch err := r.err; {
		case err == nil:
			ref.Files, ref.HeadCommit = r.files, r.version
		case errors.Is(err, gitlab.ErrNotFound):
			continue // deleted since the listing
		case errors.Is(err, gitlab.ErrUnauthorized) || ctx.Err() != nil:
			return out, err
		default:
			if i := slices.IndexFunc(prev, func(r Ref) bool { return r.Node == node }); i >= 0 {
				ref.Files, ref.HeadCommit = prev[i].Files, ""
			}
			ref.Warnings = append(ref.Warnings, deps.Warning{Message: fmt.Sprintf("dependency files of %s not read (kept from the last scan): %v", w.ref, err)})
		}
		out.refs = append(out.refs, ref)
	}
	slices.SortFunc(out.refs, func(a, b Ref) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// readAllRefs fills the Refs of every project a rule applies to: those
// whose files provably did not change (unchanged) and whose rule is the
// one they were read with keep their stored refs, renamed with the
// project; the others are read (readRefs), concurrency at a time.
func readAllRefs(ctx context.Context, gl GitLab, blobs *blobCache, projects []Project, listed []gitlab.Project, prev map[int64]Project,
	unchanged map[int64]bool, opts Options, names []string) (read, extra int, err error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	results := make([]refsRead, len(projects))
	for i := range projects {
		p := &projects[i]
		rule, ok := opts.Refs.For(p.Path)
		p.RefsRule = refSignature(rule, ok)
		if p.RefsRule == "" {
			continue
		}
		old := prev[p.ID]
		if unchanged[p.ID] && old.RefsRule == p.RefsRule {
			p.Refs = renamed(old.Refs, p.Path)
			continue
		}
		g.Go(func() error {
			r, err := readRefs(gctx, gl, blobs, listed[i], rule, old.Refs, opts.Containerfiles, names)
			if err != nil {
				return fmt.Errorf("refs of %s: %w", p.Path, err)
			}
			results[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	for i, r := range results {
		if r.refs != nil {
			projects[i].Refs = r.refs
		}
		read += r.read
		extra += r.extra
	}
	return read, extra, nil
}

// renamed gives refs the keys of their project at path (it may have moved).
func renamed(refs []Ref, path string) []Ref {
	out := slices.Clone(refs)
	for i := range out {
		out[i].Node = deps.NodeKey(path, out[i].Kind, out[i].Ref)
	}
	return out
}
