package scan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/gitlab"
)

// maxOnly is the most projects Options.Only reads one request each; past
// it, the listing (a request per 100 projects) is the cheaper way.
const maxOnly = 50

// list returns the projects a scan goes through: the scope's listing, or
// with Options.Only the projects it names as GitLab has them now and the
// other stored projects as stored (kept: taken without a request; nil
// when the scope was listed).
func list(ctx context.Context, gl GitLab, opts Options, previous []Project) (listed []gitlab.Project, kept map[int64]bool, err error) {
	if len(opts.Only) > 0 {
		if pr, ok := gl.(ProjectReader); ok {
			listed, kept, why, err := listOnly(ctx, pr, opts, previous)
			if err != nil || why == "" {
				return listed, kept, err
			}
			opts.Logger.Info("listing the scope instead of reading the pushed projects alone", "projects", opts.Only, "reason", why)
		}
	}
	listed, err = gl.ListProjects(ctx, opts.Scope)
	if err != nil {
		return nil, nil, fmt.Errorf("list projects: %w", err)
	}
	return listed, nil, nil
}

// listOnly is list with Options.Only; why says why the scope must be
// listed instead ("" when it need not).
func listOnly(ctx context.Context, pr ProjectReader, opts Options, previous []Project) (listed []gitlab.Project, kept map[int64]bool, why string, err error) {
	byPath := make(map[string]*Project, len(previous))
	for i := range previous {
		byPath[previous[i].Path] = &previous[i]
	}
	only := map[int64]string{} // id → stored path
	for _, path := range opts.Only {
		p := byPath[path]
		if p == nil {
			return nil, nil, fmt.Sprintf("%s is not stored under that path", path), nil
		}
		only[p.ID] = p.Path
	}
	if len(only) > maxOnly {
		return nil, nil, fmt.Sprintf("more than %d projects", maxOnly), nil
	}
	read := make([]gitlab.Project, 0, len(only))
	reasons := make([]string, 0, 1)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for id, path := range only {
		g.Go(func() error {
			lp, buildable, err := pr.BuildableProject(gctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, gitlab.ErrUnauthorized) || gctx.Err() != nil:
				return err
			case err != nil:
				reasons = append(reasons, err.Error())
			case !buildable:
				reasons = append(reasons, fmt.Sprintf("%s is no longer buildable", path))
			case lp.Path != path:
				reasons = append(reasons, fmt.Sprintf("%s is now %s", path, lp.Path))
			default:
				read = append(read, lp)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, "", fmt.Errorf("read pushed projects: %w", err)
	}
	if len(reasons) > 0 {
		slices.Sort(reasons)
		return nil, nil, reasons[0], nil
	}
	kept = make(map[int64]bool, len(previous))
	listed = read
	for _, p := range previous {
		if only[p.ID] == "" {
			kept[p.ID] = true
			listed = append(listed, storedListing(p))
		}
	}
	slices.SortFunc(listed, func(a, b gitlab.Project) int { return cmp.Compare(a.Path, b.Path) })
	return listed, kept, "", nil
}

// storedListing is a stored project as a listing would give it, for a
// project a scan keeps without a request. What a listing alone tells (the
// variables settings) is unknown, which keeps what is stored.
func storedListing(p Project) gitlab.Project {
	return gitlab.Project{ID: p.ID, Path: p.Path, DefaultBranch: p.DefaultBranch, RegistryPrefix: p.RegistryPrefix,
		WebURL: p.WebURL, Visibility: p.Visibility, LastActivityAt: p.LastActivity}
}
