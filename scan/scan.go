// Package scan reads the dependency declarations of every project in scope
// from GitLab into the store. Scans are incremental: a project whose
// default-branch head did not move keeps the files stored at the last scan,
// so a rescan of an unchanged instance costs about one request per page of
// projects. Every scan re-analyses all files, so the mapping of images to
// projects always reflects the current set of projects.
package scan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/store"
)

// GitLab is what a scan needs of the GitLab API; *gitlab.Client has it.
// Methods are called concurrently.
type GitLab interface {
	ListProjects(ctx context.Context, scope gitlab.Scope) ([]gitlab.Project, error)
	// FillHeadCommits sets HeadCommit, reusing the known state where it is
	// provably current, and returns how many heads it fetched.
	FillHeadCommits(ctx context.Context, projects []gitlab.Project, known map[int64]gitlab.HeadState) (int, error)
	// ReadFile returns a file at ref; errors.Is(err, gitlab.ErrNotFound)
	// when it does not exist.
	ReadFile(ctx context.Context, projectID int64, path, ref string) ([]byte, error)
	Requests() int64
}

// Store is where scans keep their results; *store.Store has it.
type Store interface {
	Projects(ctx context.Context) ([]store.Project, error)
	// ApplyScan stores the result; store.ErrScanConflict when a newer scan
	// was stored meanwhile (meta.Replaces).
	ApplyScan(ctx context.Context, projects []store.Project, meta store.ScanMeta) error
	LastScan(ctx context.Context) (store.ScanMeta, bool, error)
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
	// InstanceHost is the GitLab host; .gitlab-deps URLs on other hosts are
	// warnings.
	InstanceHost string
	// Concurrency bounds the file reads in flight. Default 8.
	Concurrency int
	Now         func() time.Time
	Logger      *slog.Logger
}

// Result summarises a scan.
type Result struct {
	store.ScanMeta
	FilesFetched int // projects whose files were read from GitLab
	HeadsFetched int // projects whose head commit had to be asked for
	Unchanged    int // projects whose stored files were reused
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
	previous, err := st.Projects(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("read stored projects: %w", err)
	}
	prevByID := make(map[int64]store.Project, len(previous))
	known := make(map[int64]gitlab.HeadState, len(previous))
	for _, p := range previous {
		prevByID[p.ID] = p
		known[p.ID] = gitlab.HeadState{Branch: p.DefaultBranch, Commit: p.HeadCommit, LastActivityAt: p.LastActivity, CheckedAt: p.HeadCheckedAt}
	}

	listed, err := gl.ListProjects(ctx, opts.Scope)
	if err != nil {
		return Result{}, fmt.Errorf("list projects: %w", err)
	}
	headsFetched, err := gl.FillHeadCommits(ctx, listed, known)
	if err != nil {
		return Result{}, fmt.Errorf("read default-branch heads: %w", err)
	}

	projects := make([]store.Project, len(listed))
	res := Result{HeadsFetched: headsFetched}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for i, lp := range listed {
		prev, hadPrev := prevByID[lp.ID]
		projects[i] = store.Project{
			ID: lp.ID, Path: lp.Path, DefaultBranch: lp.DefaultBranch, RegistryPrefix: lp.RegistryPrefix,
			WebURL: lp.WebURL, HeadCommit: lp.HeadCommit, HeadCheckedAt: lp.HeadCheckedAt,
			LastActivity: lp.LastActivityAt, ScannedAt: started,
		}
		if hadPrev && prev.HeadCommit != "" && prev.HeadCommit == lp.HeadCommit && prev.DefaultBranch == lp.DefaultBranch &&
			slices.Equal(prev.SearchedFiles, opts.Containerfiles) {
			projects[i].Files, projects[i].SearchedFiles = prev.Files, prev.SearchedFiles
			res.Unchanged++
			continue
		}
		if lp.HeadCommit == "" {
			continue // the default branch vanished: nothing to read
		}
		g.Go(func() error {
			files, err := readFiles(gctx, gl, lp, opts.Containerfiles)
			mu.Lock()
			defer mu.Unlock()
			p := &projects[i]
			switch {
			case err == nil:
				p.Files, p.SearchedFiles = files, opts.Containerfiles
				res.FilesFetched++
			case errors.Is(err, gitlab.ErrUnauthorized) || ctx.Err() != nil:
				return err
			default:
				// Keep what we had and make the next scan try again.
				opts.Logger.Warn("cannot read dependency files", "project", lp.Path, "project_id", lp.ID, "err", err)
				p.Files, p.SearchedFiles = prev.Files, prev.SearchedFiles
				// No head: the next scan asks for it and reads again,
				// whatever last_activity_at says.
				p.HeadCommit = ""
				p.Warnings = append(p.Warnings, deps.Warning{Message: fmt.Sprintf("dependency files not read (kept from the last scan): %v", err)})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, fmt.Errorf("read dependency files: %w", err)
	}

	graph := Analyze(projects, opts.Registry, opts.InstanceHost, opts.Analysis)
	res.ScanMeta = summarize(projects, graph)
	res.CyclePaths = graph.Cycles()
	res.ScanMeta.Cycles = len(res.CyclePaths)
	res.StartedAt, res.FinishedAt = started, opts.Now()
	res.Replaces, res.OnlyIfLatest = last.StartedAt, true
	res.Requests = gl.Requests() - requests0
	res.Duration = res.FinishedAt.Sub(started)
	if err := st.ApplyScan(ctx, projects, res.ScanMeta); err != nil {
		return Result{}, fmt.Errorf("store scan: %w", err)
	}
	opts.Logger.Info("scan finished", "projects", res.Projects, "edges", res.Edges, "external", res.External,
		"warnings", res.Warnings, "cycles", res.Cycles, "requests", res.Requests,
		"files_fetched", res.FilesFetched, "unchanged", res.Unchanged, "duration", res.Duration)
	return res, nil
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

// readFiles fetches the first Containerfile present and .gitlab-deps at
// the project's head commit, so both come from the same commit.
func readFiles(ctx context.Context, gl GitLab, p gitlab.Project, containerfiles []string) ([]store.File, error) {
	var files []store.File
	for _, name := range containerfiles {
		b, err := gl.ReadFile(ctx, p.ID, name, p.HeadCommit)
		if errors.Is(err, gitlab.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, store.File{Name: name, Content: b})
		break
	}
	b, err := gl.ReadFile(ctx, p.ID, deps.GitLabDepsFile, p.HeadCommit)
	switch {
	case err == nil:
		files = append(files, store.File{Name: deps.GitLabDepsFile, Content: b})
	case !errors.Is(err, gitlab.ErrNotFound):
		return nil, err
	}
	return files, nil
}

// summarize counts what the scan found.
func summarize(projects []store.Project, g *deps.Graph) store.ScanMeta {
	m := store.ScanMeta{Projects: len(projects)}
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
