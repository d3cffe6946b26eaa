// Package scan reads the dependency declarations of every project in scope
// from GitLab into the store.
//
// The files of projects that may have changed are read through GitLab's
// GraphQL API, 50 projects a request (batchReader), REST doing what GraphQL
// cannot (see docs/scale.md). The refs a `refs:` rule follows ride in the
// same batches (the branch names, the literal branches' files); the files
// at other refs (wildcard branches, the newest release tag) are read
// many projects a GraphQL request, the release tags listed through REST
// (scan/refs.go). Through REST (Options.RESTOnly, an old
// GitLab) a project costs one request to list its repository tree at the
// default branch (which dependency files exist, and their blob ids), plus
// one per file whose content the scan does not hold yet: blob ids are
// content hashes, so a file already stored, or read for another project in
// the same scan, is not read again. Both ways give the same files and the
// same version digest. Scans are incremental: a project whose default
// branch provably did not move (gitlab.Client.Unchanged) keeps the files
// stored at the last scan without a request, so a rescan of an unchanged
// instance costs about one request per page of projects. Every scan
// re-analyses all files, so the mapping of images to projects always
// reflects the current set of projects.
//
// What it holds: incremental scans of the scope into
// the store, each project at every ref `refs:` follows (`scan/refs.go`:
// the branch names and literal branches' files in the GraphQL batches,
// other refs' files many projects a request, tags listed through REST;
// REST listings and trees without GraphQL; kept while the project provably
// did not change); how each project's pipelines carry the action id (from
// its variables settings and `.gitlab-ci.yml`)
package scan

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// GitLab is what a scan needs of the GitLab API; *gitlab.Client has it.
// Methods are called concurrently.
type GitLab interface {
	ListProjects(ctx context.Context, scope gitlab.Scope) ([]gitlab.Project, error)
	// Unchanged reports, without a request, whether what known records of
	// a project is provably still current.
	Unchanged(p gitlab.Project, known gitlab.HeadState) bool
	// ListFiles returns path → blob id for those of names that exist at
	// ref; errors.Is(err, gitlab.ErrNotFound) when the ref or the
	// repository does not exist.
	ListFiles(ctx context.Context, projectID int64, ref string, names []string) (map[string]string, error)
	// ReadBlob returns the content of a blob by id.
	ReadBlob(ctx context.Context, projectID int64, blobID string) ([]byte, error)
	// BranchNames lists every branch of a project (search: GitLab's
	// filter, "" for all).
	BranchNames(ctx context.Context, projectID int64, search string) ([]string, error)
	// NewestTagNames lists a page of a project's tags, newest version
	// first (search: GitLab's filter, ^v for tags starting with v).
	NewestTagNames(ctx context.Context, projectID int64, search string) ([]string, error)
	Requests() int64
}

// BatchReader is what a GitLab may offer besides GitLab: reading the
// files of many projects in one request (GraphQL); *gitlab.Client has it.
// Run calls it concurrently.
//
// ReadBatch (gitlab.Client.ReadBatch) reads at most gitlab.MaxFilesBatch
// paths (path_with_namespace) at their default branch for the file names
// looked for, and the branch names and literal branches' files of at most
// as many projects a refs rule matches; the answer is keyed by lower-case
// path, a project it lacks or whose Err is set is read through REST, and
// errors.Is(err, gitlab.ErrGraphQLUnsupported) on the first call makes the
// whole scan use REST. ReadFilesAt (gitlab.Client.ReadFilesAt) reads the
// files at other refs (branches a wildcard matched, release tags); a read
// it lacks or whose Err is set is read through REST.
type BatchReader interface {
	ReadBatch(ctx context.Context, q gitlab.BatchQuery) (gitlab.BatchAnswer, error)
	ReadFilesAt(ctx context.Context, reads []gitlab.FilesAt, names []string) (gitlab.FilesAtAnswer, error)
}

// ProjectReader is what a GitLab may offer besides GitLab: reading one
// project by id as ListProjects would list it (*gitlab.Client has it),
// for a scan of Options.Only; buildable is false when the listing would
// leave it out.
type ProjectReader interface {
	BuildableProject(ctx context.Context, id int64) (p gitlab.Project, buildable bool, err error)
}

// Store is where scans keep their results; *store.Store has it.
type Store interface {
	Projects(ctx context.Context) ([]Project, error)
	// ApplyScan stores the result; ErrConflict when a newer scan
	// was stored meanwhile (meta.Replaces).
	ApplyScan(ctx context.Context, projects []Project, meta Meta) error
	LastScan(ctx context.Context) (Meta, bool, error)
}

// StoreAt is what a Store may also have (*store.Store has it): the
// stored projects with the generation they were read at, and ApplyScan
// given them back unchanged (it reads them again only if the generation
// moved). A scan of Options.Only, which keeps most of what it read, stores
// its result with one read of the store instead of two.
type StoreAt interface {
	ProjectsAt(ctx context.Context) (projects []Project, generation int64, err error)
	ApplyScanOver(ctx context.Context, projects []Project, meta Meta, stored []Project, generation int64) error
}

// SeenSource is what a Store may also have: the publications depsd saw
// (*store.Store has it).
type SeenSource interface {
	SeenPublications(ctx context.Context) (map[string]deps.Seen, error)
}

// Options say what to scan and how.
type Options struct {
	Scope gitlab.Scope
	// Containerfiles are the names looked for in order; the first present
	// is read. Default deps.DefaultContainerfiles().
	Containerfiles []string
	// Registry, when set, replaces each project's own registry prefix by
	// Registry/<project path> for mapping images to projects.
	Registry string
	// Analysis says how Containerfiles are read (the platforms).
	Analysis deps.Options
	// Refs are the rules of `refs:`: which refs of which projects are
	// followed beside the default branch, and what each publishes.
	Refs deps.RefRules
	// Seen are the publications depsd saw, by image, which map references
	// no template claims; nil: Run reads them from a Store that has them
	// (SeenSource).
	Seen map[string]deps.Seen
	// InstanceHost is the GitLab host; .gitlab-deps URLs on other hosts are
	// warnings.
	InstanceHost string
	// Concurrency bounds the file reads in flight. Default 8.
	Concurrency int
	// RESTOnly reads every project's files through REST (a tree listing
	// and a blob read each) even when GitLab can read them in batches
	// through GraphQL (BatchReader), as it does by default.
	RESTOnly bool
	Now      func() time.Time
	Logger   *slog.Logger
	// Only, if set, names the projects (paths) to read again, as after a
	// push to them: every other stored project is kept as stored, without
	// a request, and the scope is not listed, so that a push costs the
	// requests of its project, not a listing of the scope. The scope is
	// listed after all (as without Only) when GitLab cannot read one
	// project (ProjectReader), when Only names more than maxOnly projects,
	// or one that is not stored, was renamed or moved, or is no longer
	// buildable: what else changed then, only the listing says. Projects
	// added to or removed from the scope are the next full scan's.
	Only []string
	// Progress, if set, is told how many of the listed projects are done,
	// once the list is known and after each project. Calls do not overlap;
	// it must return quickly (the CLI draws a progress bar with it).
	Progress func(done, total int)
}

// Result summarises a scan.
type Result struct {
	Meta
	FilesFetched int // projects whose files were looked up on GitLab (a tree listing each, or a share of a GraphQL batch)
	Batches      int // GraphQL requests that read files of many projects
	BlobsRead    int // file contents read from GitLab (each distinct blob once)
	Unchanged    int // projects whose stored files were reused without a request
	RefRequests  int // requests for refs besides the default branch: branch and tag listings, trees, GraphQL reads of refs alone (not those riding in a batch)
	Targeted     int // projects of Options.Only read without listing the scope; 0 when the scope was listed
	CyclePaths   [][]string
	Duration     time.Duration
}

// Run scans the scope into st and returns a summary. It fails when GitLab
// cannot be reached or the token is rejected; a project whose files cannot
// be read keeps what was stored for it, with a warning, and is retried on
// the next scan.
func Run(ctx context.Context, gl GitLab, st Store, opts Options) (Result, error) {
	opts.setDefaults()
	started := opts.Now()
	requests0 := gl.Requests()

	last, _, err := st.LastScan(ctx)
	if err != nil {
		return Result{}, err
	}
	storeAt, handBack := st.(StoreAt)
	var previous []Project
	var generation int64
	if handBack {
		previous, generation, err = storeAt.ProjectsAt(ctx)
	} else {
		previous, err = st.Projects(ctx)
	}
	if err != nil {
		return Result{}, fmt.Errorf("read stored projects: %w", err)
	}
	prevByID := make(map[int64]Project, len(previous))
	known := make(map[int64]gitlab.HeadState, len(previous))
	blobs := newBlobCache(previous)
	for _, p := range previous {
		prevByID[p.ID] = p
		known[p.ID] = gitlab.HeadState{Branch: p.DefaultBranch, Version: p.HeadCommit, LastActivityAt: p.LastActivity, CheckedAt: p.HeadCheckedAt}
	}

	listed, kept, err := list(ctx, gl, opts, previous)
	if err != nil {
		return Result{}, err
	}

	// The CI configuration is asked for too (at no cost: it sits at the
	// root) and read only where needsCI says so.
	names := append(slices.Clone(opts.Containerfiles), deps.GitLabDepsFile, CIConfigFile)
	projects := make([]Project, len(listed))
	var res Result
	var mu sync.Mutex
	done := 0
	progress := func() { // under mu
		done++
		if opts.Progress != nil {
			opts.Progress(done, len(listed))
		}
	}
	if opts.Progress != nil {
		opts.Progress(0, len(listed))
	}
	// record stores what reading project i's files gave. Callers hold mu.
	record := func(i int, r filesRead) error {
		lp := listed[i]
		prev := prevByID[lp.ID]
		defer progress()
		res.BlobsRead += r.read
		p := &projects[i]
		switch err := r.err; {
		case err == nil:
			p.Files, p.SearchedFiles = r.files, opts.Containerfiles
			p.HeadCommit, p.HeadCheckedAt = r.version, started
			p.PipelineIdent = identify(lp.Variables, prev.PipelineIdent, r.ci)
			res.FilesFetched++
		case errors.Is(err, gitlab.ErrNotFound):
			// The default branch vanished, or the repository is empty:
			// nothing to read, and the next scan asks again.
			opts.Logger.Warn("default branch not found", "project", lp.Path, "project_id", lp.ID, "ref", lp.DefaultBranch)
		case errors.Is(err, gitlab.ErrUnauthorized) || ctx.Err() != nil:
			return err
		default:
			// Keep what we had and make the next scan try again: no
			// version, so Unchanged cannot vouch for it, whatever
			// last_activity_at says.
			opts.Logger.Warn("cannot read dependency files", "project", lp.Path, "project_id", lp.ID, "err", err)
			p.Files, p.SearchedFiles = prev.Files, prev.SearchedFiles
			p.Warnings = append(p.Warnings, deps.Warning{Message: fmt.Sprintf("dependency files not read (kept from the last scan): %v", err)})
		}
		return nil
	}
	var pending []int
	unchanged := map[int64]bool{}
	for i, lp := range listed {
		prev, hadPrev := prevByID[lp.ID]
		projects[i] = Project{
			ID: lp.ID, Path: lp.Path, DefaultBranch: lp.DefaultBranch, RegistryPrefix: lp.RegistryPrefix,
			WebURL: lp.WebURL, Visibility: lp.Visibility, LastActivity: lp.LastActivityAt, ScannedAt: started,
		}
		// Without a listing (Options.Only), a project is either kept or
		// read: the one read is the one pushed to.
		if hadPrev && (kept[lp.ID] || kept == nil && gl.Unchanged(lp, known[lp.ID])) && slices.Equal(prev.SearchedFiles, opts.Containerfiles) {
			p := &projects[i]
			// Nothing read: the row keeps its times, so that a scan
			// that finds a project as it was writes nothing of it (a
			// rescan after a push rewrote every row, holding the write
			// lock, and the webhooks' answers behind it, for
			// milliseconds). The check time that vouched for the head
			// vouches as long as its last activity stays the same.
			p.Files, p.SearchedFiles = prev.Files, prev.SearchedFiles
			p.HeadCommit, p.HeadCheckedAt, p.ScannedAt = prev.HeadCommit, prev.HeadCheckedAt, prev.ScannedAt
			p.PipelineIdent = identify(lp.Variables, prev.PipelineIdent, ciRead{})
			unchanged[lp.ID] = true
			res.Unchanged++
			mu.Lock()
			progress()
			mu.Unlock()
			continue
		}
		pending = append(pending, i)
	}
	// needCI says whether project i's CI configuration is read (needsCI).
	needCI := func(i int) bool {
		return needsCI(listed[i].Variables, prevByID[listed[i].ID].PipelineIdent)
	}
	readREST := func(gctx context.Context, i int) error {
		r := readFiles(gctx, gl, blobs, listed[i], opts.Containerfiles, names, needCI(i))
		mu.Lock()
		defer mu.Unlock()
		return record(i, r)
	}
	recordBatch := func(i int, r filesRead) error {
		mu.Lock()
		defer mu.Unlock()
		return record(i, r)
	}
	// The refs each project's rule follows: those read again this scan
	// (scan/refs.go).
	jobs := planRefs(projects, prevByID, unchanged, opts.Refs)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	br, batched := gl.(BatchReader)
	batched = batched && !opts.RESTOnly && len(pending)+len(jobs) > 0
	var b batchReader
	var src *refsSource
	var refRequests atomic.Int64
	if batched {
		// The followed branches of a batch's projects are read with it;
		// those of projects not read otherwise (their rule changed) in
		// batches of their own.
		refNames := append(slices.Clone(opts.Containerfiles), deps.GitLabDepsFile)
		src = &refsSource{names: refNames, seen: map[int]gitlab.ProjectRefs{}}
		b = batchReader{gl: gl, br: br, blobs: blobs, names: names, containerfiles: opts.Containerfiles, listed: listed, needCI: needCI,
			logger: opts.Logger, rules: jobs, refs: src}
		src.b = b
		hasRefs := func(i int) bool { return len(jobs[i].Branches) > 0 }
		type part struct{ batch, refs []int }
		var parts []part
		for _, batch := range spread(pending, hasRefs, gitlab.MaxFilesBatch) {
			parts = append(parts, part{batch, slices.DeleteFunc(slices.Clone(batch), func(i int) bool { return !hasRefs(i) })})
		}
		pending = nil
		var alone []int
		inPart := map[int]bool{}
		for _, p := range parts {
			for _, i := range p.refs {
				inPart[i] = true
			}
		}
		for i, rule := range jobs {
			if len(rule.Branches) > 0 && !inPart[i] {
				alone = append(alone, i)
			}
		}
		slices.Sort(alone)
		for len(alone) > 0 {
			refs := alone[:min(len(alone), gitlab.MaxFilesBatch)]
			alone = alone[len(refs):]
			parts = append(parts, part{nil, refs})
		}
		if len(parts) > 0 && len(parts[0].batch) > 0 {
			// The first batch alone: an instance that cannot read files
			// through GraphQL is found out once, and then read through
			// REST.
			n, err := b.read(ctx, parts[0].batch, parts[0].refs, true, readREST, recordBatch)
			switch {
			case errors.Is(err, gitlab.ErrGraphQLUnsupported):
				opts.Logger.Warn("GitLab cannot read repository files through GraphQL; reading them through REST for this scan", "err", err)
				batched, src = false, nil
				for _, p := range parts {
					pending = append(pending, p.batch...)
				}
				parts = nil
			case err != nil:
				return Result{}, fmt.Errorf("read dependency files: %w", err)
			default:
				res.Batches++
				refRequests.Add(int64(n))
				parts = parts[1:]
			}
		}
		for _, p := range parts {
			if len(p.batch) > 0 {
				res.Batches++
			}
			g.Go(func() error {
				n, err := b.read(gctx, p.batch, p.refs, false, readREST, recordBatch)
				refRequests.Add(int64(n))
				return err
			})
		}
	}
	if !batched {
		for _, i := range pending {
			g.Go(func() error { return readREST(gctx, i) })
		}
	}
	if err := g.Wait(); err != nil {
		return Result{}, fmt.Errorf("read dependency files: %w", err)
	}
	read, extra, err := readAllRefs(ctx, gl, blobs, projects, listed, prevByID, jobs, src, opts, names)
	if err != nil {
		return Result{}, fmt.Errorf("read followed refs: %w", err)
	}
	extra += int(refRequests.Load())
	res.BlobsRead += read
	res.RefRequests = extra
	// The reads are done: what only they needed (the listing, the stored
	// projects, their blobs) is let go before the analysis and the write,
	// the scan's largest allocations. A scan of Options.Only keeps the
	// stored projects for the write (StoreAt): it holds little else.
	var stored []Project
	if handBack && kept != nil {
		stored = previous
	}
	listed, previous, prevByID, known, blobs, b, src = nil, nil, nil, nil, nil, batchReader{}, nil

	if ss, ok := st.(SeenSource); ok && opts.Seen == nil {
		if opts.Seen, err = ss.SeenPublications(ctx); err != nil {
			return Result{}, err
		}
	}
	graph := Analyze(projects, AnalyzeOptions{Registry: opts.Registry, InstanceHost: opts.InstanceHost,
		Analysis: opts.Analysis, Refs: opts.Refs, Seen: opts.Seen})
	res.Meta = summarize(projects, graph)
	res.CyclePaths = graph.Cycles()
	res.Meta.Cycles = len(res.CyclePaths)
	res.StartedAt, res.FinishedAt = started, opts.Now()
	res.Replaces, res.OnlyIfLatest = last.StartedAt, true
	res.Requests = gl.Requests() - requests0
	res.Duration = res.FinishedAt.Sub(started)
	if kept != nil {
		res.Targeted = res.Projects - len(kept)
	}
	if stored != nil {
		err = storeAt.ApplyScanOver(ctx, projects, res.Meta, stored, generation)
	} else {
		err = st.ApplyScan(ctx, projects, res.Meta)
	}
	if err != nil {
		return Result{}, fmt.Errorf("store scan: %w", err)
	}
	opts.Logger.Info("scan finished", "projects", res.Projects, "edges", res.Edges, "external", res.External,
		"warnings", res.Warnings, "cycles", res.Cycles, "requests", res.Requests,
		"files_fetched", res.FilesFetched, "graphql_batches", res.Batches, "unchanged", res.Unchanged, "targeted", res.Targeted, "duration", res.Duration)
	return res, nil
}

// spread cuts pending into batches of size (the last one smaller), with
// the projects whose branches a batch reads (hasRefs) dealt evenly over
// them: a batch carries a few projects' branch names beside its default
// branches within GitLab's complexity limit, and needs requests of its
// own past them (gitlab.Client.ReadBatch), so projects a rule matches,
// which sit together in a listing (a group, a team), are better spread.
func spread(pending []int, hasRefs func(int) bool, size int) [][]int {
	var refs, others []int
	for _, i := range pending {
		if hasRefs(i) {
			refs = append(refs, i)
		} else {
			others = append(others, i)
		}
	}
	batches := make([][]int, (len(pending)+size-1)/size)
	for k, i := range refs {
		batches[k%len(batches)] = append(batches[k%len(batches)], i)
	}
	for k := range batches {
		n := min(size-len(batches[k]), len(others))
		batches[k] = append(batches[k], others[:n]...)
		others = others[n:]
	}
	return batches
}

func (o *Options) setDefaults() {
	if len(o.Containerfiles) == 0 {
		o.Containerfiles = deps.DefaultContainerfiles()
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// filesRead is what reading a project's files gave: the files, a version
// naming them (a digest of their names and blob ids, kept as the
// project's HeadCommit), how many blobs were read from GitLab, what was
// read of the CI configuration, or why nothing could be read.
type filesRead struct {
	files   []File
	version string
	read    int
	ci      ciRead
	err     error
}

// readFiles lists the project's tree at its default branch and reads the
// first Containerfile present and .gitlab-deps, by blob id, so both come
// from the same tree, and the CI configuration when withCI.
func readFiles(ctx context.Context, gl GitLab, blobs *blobCache, p gitlab.Project, containerfiles, names []string, withCI bool) filesRead {
	found, err := gl.ListFiles(ctx, p.ID, p.DefaultBranch, names)
	if err != nil {
		return filesRead{err: err}
	}
	var chosen []string
	for _, name := range containerfiles {
		if _, ok := found[name]; ok {
			chosen = append(chosen, name)
			break
		}
	}
	if _, ok := found[deps.GitLabDepsFile]; ok {
		chosen = append(chosen, deps.GitLabDepsFile)
	}
	r := filesRead{files: make([]File, 0, len(chosen))}
	version := sha1.New()
	for _, name := range chosen {
		id := found[name]
		b, fetched, err := blobs.get(ctx, gl, p.ID, id)
		if fetched {
			r.read++
		}
		if err != nil {
			return filesRead{read: r.read, err: fmt.Errorf("read %s: %w", name, err)}
		}
		r.files = append(r.files, File{Name: name, Content: b})
		fmt.Fprintf(version, "%s\x00%s\n", name, id)
	}
	r.version = "blobs:" + hex.EncodeToString(version.Sum(nil))
	if withCI {
		r.ci.read = true
		if id := found[CIConfigFile]; id != "" {
			b, fetched, err := blobs.get(ctx, gl, p.ID, id)
			if fetched {
				r.read++
			}
			r.ci.read, r.ci.declares = err == nil, err == nil && DeclaresActionIDInput(b)
		}
	}
	return r
}

// blobCache holds file contents by git blob id for one scan: the files
// stored by the last scan (at every node), and every blob read during this
// one, so that identical content is read at most once.
type blobCache struct {
	mu      sync.Mutex
	entries map[string]*blobEntry
}

type blobEntry struct {
	done    chan struct{} // closed when data and err are set
	data    []byte
	err     error
	waiters int // calls waiting for done (under blobCache.mu; tests watch it)
}

func newBlobCache(previous []Project) *blobCache {
	c := &blobCache{entries: map[string]*blobEntry{}}
	closed := make(chan struct{})
	close(closed)
	for _, p := range previous {
		for _, f := range p.Files {
			c.entries[blobID(f.Content)] = &blobEntry{done: closed, data: f.Content}
		}
		for _, r := range p.Refs {
			for _, f := range r.Files {
				c.entries[blobID(f.Content)] = &blobEntry{done: closed, data: f.Content}
			}
		}
	}
	return c
}

// get returns the blob's content, reading it from the project unless it
// is known or being read for another project. fetched reports whether
// this call read it. A read that fails for another project is not this
// project's failure (a 404 there says nothing here): the caller then reads
// the blob itself.
func (c *blobCache) get(ctx context.Context, gl GitLab, projectID int64, id string) (data []byte, fetched bool, err error) {
	for {
		c.mu.Lock()
		e, ok := c.entries[id]
		if !ok {
			e = &blobEntry{done: make(chan struct{})}
			c.entries[id] = e
			c.mu.Unlock()
			return c.read(ctx, gl, projectID, id, e)
		}
		e.waiters++
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if e.err == nil {
			return e.data, false, nil
		}
		// The reader failed and removed the entry: go round and read it.
	}
}

// read reads the blob for e, whose creator the caller is.
func (c *blobCache) read(ctx context.Context, gl GitLab, projectID int64, id string, e *blobEntry) ([]byte, bool, error) {
	e.data, e.err = gl.ReadBlob(ctx, projectID, id)
	if e.err != nil {
		// Let the waiters and later projects try again rather than
		// inherit the failure.
		c.mu.Lock()
		delete(c.entries, id)
		c.mu.Unlock()
	}
	close(e.done)
	return e.data, true, e.err
}

// put records content read another way (GraphQL) under its blob id and
// reports whether the cache did not know it.
func (c *blobCache) put(id string, data []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[id]; ok {
		return false
	}
	done := make(chan struct{})
	close(done)
	c.entries[id] = &blobEntry{done: done, data: data}
	return true
}

// blobID is git's object id of content: SHA-1 of "blob <size>\x00<content>".
// A repository using SHA-256 object ids never matches, and its files are
// simply read each time.
func blobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// summarize counts what the scan found.
func summarize(projects []Project, g *deps.Graph) Meta {
	m := Meta{Projects: len(projects)}
	external := map[string]bool{}
	for _, p := range projects {
		m.Warnings += len(p.Warnings)
		for _, d := range p.Dependencies {
			if d.Project == "" && d.Image != "" {
				external[d.Image] = true
			}
		}
	}
	for _, p := range g.Projects() {
		m.Edges += len(g.Downstream(p))
	}
	m.External = len(external)
	return m
}
