package gitlab

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
	"golang.org/x/sync/errgroup"
)

// Project is a project in scope that depsd can build.
type Project struct {
	ID             int64
	Path           string // path_with_namespace
	DefaultBranch  string
	RegistryPrefix string // container_registry_image_prefix, e.g. registry.example.com/g/app
	WebURL         string
	// Visibility is who may see the project: public, internal or private.
	Visibility string
	// LastActivityAt is GitLab's last_activity_at, the cheap change signal
	// (see the package doc).
	LastActivityAt time.Time
	// Variables is what the project's CI/CD settings say of pipeline
	// variables from the token's user, where GitLab shows them.
	Variables VariablesPolicy
}

// ListProjects returns the buildable projects of scope, deduplicated and
// sorted by Path: the projects of each group and all its subgroups (not
// projects merely shared with it), and the single projects. Archived
// projects, projects pending deletion, empty repositories, projects without
// a default branch and excluded paths are left out. A group or single
// project that does not exist is an error (errors.Is ErrNotFound), so a typo
// in the scope is not silently an empty scan.
//
// It costs one request per page of 100 projects per group (and of the
// instance, with Scope.Instance) plus one per single project.
func (c *Client) ListProjects(ctx context.Context, scope Scope) ([]Project, error) {
	ex, err := newExcluder(scope.Exclude)
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		seen = map[int64]listedProject{}
	)
	add := func(ps []listedProject) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range ps {
			seen[p.ID] = p
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	if scope.Instance {
		g.Go(func() error {
			ps, err := c.instanceProjects(gctx)
			if err != nil {
				return fmt.Errorf("list the instance's projects: %w", err)
			}
			add(ps)
			return nil
		})
	}
	for _, grp := range scope.Groups {
		g.Go(func() error {
			ps, err := c.groupProjects(gctx, grp)
			if err != nil {
				return fmt.Errorf("list projects of group %s: %w", grp, err)
			}
			add(ps)
			return nil
		})
	}
	for _, path := range scope.Projects {
		g.Go(func() error {
			p, err := c.getProject(gctx, path)
			if err != nil {
				return err
			}
			add([]listedProject{p})
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	out := make([]Project, 0, len(seen))
	for _, p := range seen {
		if p.skip != "" {
			c.log.Debug("project skipped", "project", p.Path, "project_id", p.ID, "reason", p.skip)
			continue
		}
		if pat, ok := ex.excluded(p.Path); ok {
			c.log.Debug("project excluded", "project", p.Path, "project_id", p.ID, "pattern", pat)
			continue
		}
		out = append(out, p.Project)
	}
	slices.SortFunc(out, func(a, b Project) int { return cmp.Compare(a.Path, b.Path) })
	return out, nil
}

// BuildableProject reads one project by id as ListProjects would list it,
// for a scan of a few projects that does not list the scope (a push's
// rescan). buildable is false when ListProjects would leave it out
// (archived, pending deletion, empty, no default branch); exclusions are
// the caller's. It costs one request.
func (c *Client) BuildableProject(ctx context.Context, id int64) (p Project, buildable bool, err error) {
	lp, err := c.getProject(ctx, id)
	return lp.Project, err == nil && lp.skip == "", err
}

// getProject reads one project by id or path, reduced as a listing's.
func (c *Client) getProject(ctx context.Context, pid any) (listedProject, error) {
	var p *gl.Project
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		p, resp, err = c.gl.Projects.GetProject(pid, nil, o...)
		return resp, err
	})
	if err != nil {
		return listedProject{}, fmt.Errorf("get project %v: %w", pid, err)
	}
	return reduce(p), nil
}

// listedProject is a project of a listing, reduced at once to what depsd
// keeps: client-go's Project takes kilobytes, and holding a whole
// instance's worth of them until the listing ends made the listing the
// peak of depsd serve's memory.
type listedProject struct {
	Project
	skip string // why depsd leaves it out (skipReason); "" if it does not
}

func reduce(p *gl.Project) listedProject {
	return listedProject{Project: convertProject(p), skip: skipReason(p)}
}

func skipReason(p *gl.Project) string {
	switch {
	case p.Archived:
		return "archived"
	case p.MarkedForDeletionOn != nil:
		return "pending deletion"
	case p.EmptyRepo:
		return "empty repository"
	case p.DefaultBranch == "":
		return "no default branch"
	}
	return ""
}

func convertProject(p *gl.Project) Project {
	out := Project{
		ID:             p.ID,
		Path:           p.PathWithNamespace,
		DefaultBranch:  p.DefaultBranch,
		RegistryPrefix: strings.ToLower(p.ContainerRegistryImagePrefix),
		WebURL:         p.WebURL,
		Visibility:     string(p.Visibility),
		Variables:      variablesPolicy(p),
	}
	if p.LastActivityAt != nil {
		out.LastActivityAt = *p.LastActivityAt
	}
	return out
}

// groupProjects lists a group's own and subgroups' projects. After the first
// page, when GitLab reports the page count (it does up to 10,000 records),
// the remaining pages are fetched in parallel; otherwise X-Next-Page is
// followed. Pages are ordered by id so that they do not shift under
// concurrent renames, and duplicates across pages are removed by the
// caller.
func (c *Client) groupProjects(ctx context.Context, group string) ([]listedProject, error) {
	page := func(ctx context.Context, n int64) ([]listedProject, *gl.Response, error) {
		opt := &gl.ListGroupProjectsOptions{
			ListOptions:      gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: n},
			IncludeSubGroups: gl.Ptr(true),
			Archived:         gl.Ptr(false),
			WithShared:       gl.Ptr(false),
			OrderBy:          gl.Ptr("id"),
			Sort:             gl.Ptr("asc"),
		}
		var ps []*gl.Project
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			ps, resp, err = c.gl.Groups.ListGroupProjects(group, opt, o...)
			return resp, err
		})
		out := make([]listedProject, len(ps))
		for i, p := range ps {
			out[i] = reduce(p)
		}
		return out, resp, err
	}
	// Offset pages shift when a project of an earlier page is deleted or
	// archived while they are read, and a project would slip through.
	// Every page carries X-Total: when the pages disagree, list again.
	for attempt := 1; ; attempt++ {
		all, consistent, err := c.allPages(ctx, page)
		if err != nil || consistent || attempt == 3 {
			if !consistent && err == nil {
				c.log.Warn("group changed during every listing; the next scan completes it", "group", group)
			}
			return all, err
		}
	}
}

// instanceProjects lists every project the token can see with keyset
// pagination (GET /projects?pagination=keyset&order_by=id&sort=asc,
// following Link rel="next"): GitLab refuses offset pagination of this
// listing past 50,000 rows, and keyset pages do not shift when a project
// of an earlier page is deleted. One request per 100 projects, one after
// another.
func (c *Client) instanceProjects(ctx context.Context) ([]listedProject, error) {
	opt := &gl.ListProjectsOptions{
		ListOptions: gl.ListOptions{Pagination: "keyset", PerPage: int64(c.cfg.PerPage), OrderBy: "id", Sort: "asc"},
		Archived:    gl.Ptr(false),
	}
	var all []listedProject
	next := ""
	for {
		var ps []*gl.Project
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			if next != "" {
				o = append(o, gl.WithKeysetPaginationParameters(next))
			}
			var err error
			ps, resp, err = c.gl.Projects.ListProjects(opt, o...)
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			all = append(all, reduce(p))
		}
		if resp.NextLink == "" || len(ps) == 0 {
			return all, nil
		}
		next = resp.NextLink
	}
}

// allPages reads every page of a listing: the pages after the first in
// parallel when the total is known, else one after another. consistent is
// false when the pages disagree on the total number of projects.
func (c *Client) allPages(ctx context.Context, page func(context.Context, int64) ([]listedProject, *gl.Response, error)) (all []listedProject, consistent bool, err error) {
	all, resp, err := page(ctx, 1)
	if err != nil {
		return nil, false, err
	}
	total := resp.TotalItems
	var mu sync.Mutex
	consistent = true
	check := func(r *gl.Response) {
		mu.Lock()
		defer mu.Unlock()
		if r.TotalItems != total {
			consistent = false
		}
	}
	if resp.TotalPages > 1 {
		pages := make([][]listedProject, resp.TotalPages+1)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(c.cfg.Concurrency)
		for n := int64(2); n <= resp.TotalPages; n++ {
			g.Go(func() error {
				ps, r, err := page(gctx, n)
				if err == nil {
					check(r)
				}
				pages[n] = ps
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, false, err
		}
		for _, ps := range pages {
			all = append(all, ps...)
		}
		return all, consistent, nil
	}
	for next := resp.NextPage; next != 0; {
		ps, r, err := page(ctx, next)
		if err != nil {
			return nil, false, err
		}
		check(r)
		all = append(all, ps...)
		next = r.NextPage
	}
	return all, consistent, nil
}
