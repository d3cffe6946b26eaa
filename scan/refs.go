package scan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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
	extra int // requests beyond the default branch's: listings, trees, GraphQL reads of refs alone
}

// refWant is a ref of a project its rule follows: a branch, or the newest
// release tag.
type refWant struct {
	kind deps.NodeKind
	ref  string
}

// followedBranch says whether branch is a node of p beside its default
// branch under rule (a branch named like the release-tag node is not,
// when the project releases by tags).
func followedBranch(p gitlab.Project, rule deps.RefRule, branch string) bool {
	return branch != p.DefaultBranch && rule.FollowsBranch(branch) && !(branch == deps.TagsRef && rule.Tags != "")
}

// literalBranches are the branches rule names without a wildcard that may
// be nodes of p: a batch reads their files with the branch names.
func literalBranches(p gitlab.Project, rule deps.RefRule) []string {
	var out []string
	for _, b := range rule.Branches {
		if !strings.Contains(b, "*") && followedBranch(p, rule, b) && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// wants are the refs of p that rule follows, given its branch names and a
// page of its tags newest first (nil when the rule has no tags).
func wants(p gitlab.Project, rule deps.RefRule, branches, tags []string) []refWant {
	var out []refWant
	branches = slices.Sorted(slices.Values(branches))
	for _, b := range branches {
		if followedBranch(p, rule, b) {
			out = append(out, refWant{deps.NodeBranch, b})
		}
	}
	if rule.Tags != "" {
		if rel, ok := deps.LatestRelease(tags, rule.Tags); ok {
			out = append(out, refWant{deps.NodeTags, rel.Tag})
		}
	}
	return out
}

// listRefs lists what readRefs needs through REST: the branch names (when
// the rule follows branches and branches is nil) and the newest tags (when
// it follows tags). extra counts the requests.
func listRefs(ctx context.Context, gl GitLab, p gitlab.Project, rule deps.RefRule, branches []string, extra *int) ([]refWant, error) {
	if len(rule.Branches) > 0 && branches == nil {
		var err error
		branches, err = gl.BranchNames(ctx, p.ID, "")
		*extra++
		if err != nil {
			return nil, err
		}
	}
	var tags []string
	if rule.Tags != "" {
		var err error
		tags, err = gl.NewestTagNames(ctx, p.ID, tagSearch(rule.Tags))
		*extra++
		if err != nil {
			return nil, err
		}
	}
	return wants(p, rule, branches, tags), nil
}

// refOf is the Ref of p at w given what reading its files gave: keep is
// false for a ref that vanished since it was listed; a ref that cannot be
// read keeps what prev held for it, with a warning; err stops the scan.
func refOf(ctx context.Context, p gitlab.Project, w refWant, r filesRead, prev []Ref) (ref Ref, keep bool, err error) {
	node := deps.NodeKey(p.Path, w.kind, w.ref)
	ref = Ref{Node: node, Kind: w.kind, Ref: w.ref}
	switch err := r.err; {
	case err == nil:
		ref.Files, ref.HeadCommit = r.files, r.version
	case errors.Is(err, gitlab.ErrNotFound):
		return Ref{}, false, nil // deleted since the listing
	case errors.Is(err, gitlab.ErrUnauthorized) || ctx.Err() != nil:
		return Ref{}, false, err
	default:
		if i := slices.IndexFunc(prev, func(r Ref) bool { return r.Node == node }); i >= 0 {
			ref.Files, ref.HeadCommit = prev[i].Files, ""
		}
		ref.Warnings = append(ref.Warnings, deps.Warning{Message: fmt.Sprintf("dependency files of %s not read (kept from the last scan): %v", w.ref, err)})
	}
	return ref, true, nil
}

// readRefs lists the branches and release tags of p that rule follows and
// reads each one's dependency files (REST: a tree listing each, blobs by
// id through the cache). A ref that vanished between the listing and the
// read is left out; one that cannot be read keeps what prev held for it,
// with a warning.
func readRefs(ctx context.Context, gl GitLab, blobs *blobCache, p gitlab.Project, rule deps.RefRule, prev []Ref, containerfiles, names []string) (refsRead, error) {
	var out refsRead
	ws, err := listRefs(ctx, gl, p, rule, nil, &out.extra)
	if err != nil {
		return out, err
	}
	for _, w := range ws {
		at := p
		at.DefaultBranch = w.ref
		r := readFiles(ctx, gl, blobs, at, containerfiles, names, false)
		out.extra++
		out.read += r.read
		ref, keep, err := refOf(ctx, p, w, r, prev)
		if err != nil {
			return out, err
		}
		if keep {
			out.refs = append(out.refs, ref)
		}
	}
	slices.SortFunc(out.refs, func(a, b Ref) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// planRefs sets the RefsRule of every project and gives those whose files
// provably did not change (unchanged), and whose rule is the one they were
// read with, their stored refs, renamed with the project. It returns the
// rules of the others, by index: the projects whose refs this scan reads.
func planRefs(projects []Project, prev map[int64]Project, unchanged map[int64]bool, rules deps.RefRules) map[int]deps.RefRule {
	jobs := map[int]deps.RefRule{}
	for i := range projects {
		p := &projects[i]
		rule, ok := rules.For(p.Path)
		p.RefsRule = refSignature(rule, ok)
		if p.RefsRule == "" {
			continue
		}
		old := prev[p.ID]
		if unchanged[p.ID] && old.RefsRule == p.RefsRule {
			p.Refs = keptRefs(old.Refs, p.Path)
			continue
		}
		jobs[i] = rule
	}
	return jobs
}

// refsSource is what a scan's GraphQL batches gave for refs: each
// project's branch names and literal branches' files (batchReader.read),
// and the reader of files at other refs. Nil when the scan reads
// through REST.
type refsSource struct {
	b     batchReader
	names []string // the file names read at refs
	mu    sync.Mutex
	seen  map[int]gitlab.ProjectRefs
}

func (s *refsSource) record(i int, pr gitlab.ProjectRefs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[i] = pr
}

// readAllRefs fills the Refs of the projects of jobs (planRefs), the
// others keeping what planRefs gave them: through REST (readRefs,
// concurrency at a time), or from what the GraphQL batches read
// (src, readRefsBatched).
func readAllRefs(ctx context.Context, gl GitLab, blobs *blobCache, projects []Project, listed []gitlab.Project, prev map[int64]Project,
	jobs map[int]deps.RefRule, src *refsSource, opts Options, names []string) (read, extra int, err error) {
	results := make([]refsRead, len(projects))
	rest := jobs
	if src != nil {
		if rest, err = readRefsBatched(ctx, gl, src, listed, prev, jobs, results, opts); err != nil {
			return 0, 0, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for i, rule := range rest {
		p := &projects[i]
		g.Go(func() error {
			r, err := readRefs(gctx, gl, blobs, listed[i], rule, prev[p.ID].Refs, opts.Containerfiles, names)
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
	for i := range jobs {
		projects[i].Refs = results[i].refs
	}
	for _, r := range results {
		read += r.read
		extra += r.extra
	}
	return read, extra, nil
}

// filesAtChunk is how many reads at refs one ReadFilesAt call takes (the
// client splits them into requests by GitLab's complexity): chunks run
// concurrently.
const filesAtChunk = 50

// readRefsBatched reads the refs of jobs from what the GraphQL batches
// gave: the branch names (a branch the names do not hold is no node), the
// literal branches' files, then the files of the other refs (branches a
// wildcard matched, the newest release tag) with ReadFilesAt, many
// projects' refs a request. Branch names past a page are listed through
// REST, and so are the release tags (GitLab's GraphQL lists no tags); a
// ref whose files GraphQL did not give is read through REST. It fills
// results and returns the jobs to read through REST altogether: those the
// batches gave nothing for (a field error, a failed request).
func readRefsBatched(ctx context.Context, gl GitLab, src *refsSource, listed []gitlab.Project, prev map[int64]Project,
	jobs map[int]deps.RefRule, results []refsRead, opts Options) (map[int]deps.RefRule, error) {
	rest := map[int]deps.RefRule{}
	type job struct {
		i     int
		rule  deps.RefRule
		wants []refWant
		files []*gitlab.ProjectBlobs // per want: what GraphQL gave; nil: none yet
	}
	var todo []*job
	for i, rule := range jobs {
		pr, ok := src.seen[i]
		if len(rule.Branches) > 0 && (!ok || pr.Err != nil) {
			rest[i] = rule
			continue
		}
		todo = append(todo, &job{i: i, rule: rule})
	}
	slices.SortFunc(todo, func(a, b *job) int { return a.i - b.i })

	// The names past a page, and the tags: REST listings.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, j := range todo {
		g.Go(func() error {
			pr := src.seen[j.i]
			var branches []string // nil: listed through REST
			if len(j.rule.Branches) > 0 && pr.Complete {
				branches = append([]string{}, pr.Branches...)
			}
			ws, err := listRefs(gctx, gl, listed[j.i], j.rule, branches, &results[j.i].extra)
			if err != nil {
				return fmt.Errorf("refs of %s: %w", listed[j.i].Path, err)
			}
			j.wants, j.files = ws, make([]*gitlab.ProjectBlobs, len(ws))
			for k, w := range ws {
				if blobs, ok := pr.Files[w.ref]; ok && w.kind == deps.NodeBranch {
					j.files[k] = &gitlab.ProjectBlobs{Blobs: blobs}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	// The files of the other refs, many projects' a request.
	var reads []gitlab.FilesAt
	for _, j := range todo {
		for k, w := range j.wants {
			if j.files[k] == nil {
				reads = append(reads, gitlab.FilesAt{Path: listed[j.i].Path, Ref: w.ref})
			}
		}
	}
	var mu sync.Mutex
	got := map[gitlab.FilesAt]gitlab.ProjectBlobs{}
	requests := 0
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for len(reads) > 0 {
		chunk := reads[:min(len(reads), filesAtChunk)]
		reads = reads[len(chunk):]
		g.Go(func() error {
			ans, err := src.b.br.ReadFilesAt(gctx, chunk, src.names)
			mu.Lock()
			defer mu.Unlock()
			requests += ans.Requests
			for r, pb := range ans.Files {
				got[r] = pb
			}
			switch {
			case errors.Is(err, gitlab.ErrUnauthorized) || gctx.Err() != nil:
				return err
			case err != nil:
				// Those not read are read through REST.
				opts.Logger.Warn("GraphQL read of refs failed; reading them through REST", "refs", len(chunk), "err", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("refs: %w", err)
	}
	// The GraphQL requests of ReadFilesAt count once, on the first job.
	if len(todo) > 0 {
		results[todo[0].i].extra += requests
	}

	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, j := range todo {
		g.Go(func() error {
			lp := listed[j.i]
			out := &results[j.i]
			for k, w := range j.wants {
				pb := j.files[k]
				if pb == nil {
					if a, ok := got[gitlab.FilesAt{Path: lp.Path, Ref: w.ref}]; ok && a.Err == nil {
						pb = &a
					}
				}
				var r filesRead
				if pb != nil {
					r = src.b.files(gctx, lp, *pb, false)
				} else {
					at := lp
					at.DefaultBranch = w.ref
					r = readFiles(gctx, gl, src.b.blobs, at, opts.Containerfiles, src.b.names, false)
					out.extra++
				}
				out.read += r.read
				ref, keep, err := refOf(gctx, lp, w, r, prev[lp.ID].Refs)
				if err != nil {
					return fmt.Errorf("refs of %s: %w", lp.Path, err)
				}
				if keep {
					out.refs = append(out.refs, ref)
				}
			}
			slices.SortFunc(out.refs, func(a, b Ref) int { return strings.Compare(a.Node, b.Node) })
			return nil
		})
	}
	return rest, g.Wait()
}

// keptRefs is what a scan keeps of the refs of a project it does not read
// again: each ref and its files, keyed under path (the project may have
// been renamed), without what the analysis made of them, which Analyze
// makes again (kept, a ref's warnings were added to at every scan).
func keptRefs(refs []Ref, path string) []Ref {
	out := make([]Ref, len(refs))
	for i, r := range refs {
		out[i] = Ref{Node: deps.NodeKey(path, r.Kind, r.Ref), Kind: r.Kind, Ref: r.Ref, HeadCommit: r.HeadCommit, Files: r.Files}
	}
	return out
}
