package gitlab

import (
	"context"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// BranchNames returns the names of every branch of the project
// (GET /projects/:id/repository/branches, following X-Next-Page): one
// request for up to PerPage branches. search, when set, is GitLab's branch
// filter (a substring, ^ anchoring its start and $ its end).
func (c *Client) BranchNames(ctx context.Context, projectID int64, search string) ([]string, error) {
	opt := &gl.ListBranchesOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}}
	if search != "" {
		opt.Search = gl.Ptr(search)
	}
	var names []string
	for {
		var page []*gl.Branch
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.Branches.ListBranches(projectID, opt, o...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list branches of project %d: %w", projectID, err)
		}
		for _, b := range page {
			names = append(names, b.Name)
		}
		if resp.NextPage == 0 {
			return names, nil
		}
		opt.Page = resp.NextPage
	}
}

// NewestTagNames returns up to one page of the project's tag names,
// newest version first (GET /projects/:id/repository/tags?order_by=version,
// GitLab's ordering by version number): where the newest release is. search
// filters as BranchNames' does (^v: the tags starting with v).
func (c *Client) NewestTagNames(ctx context.Context, projectID int64, search string) ([]string, error) {
	opt := &gl.ListTagsOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1},
		OrderBy: gl.Ptr("version"), Sort: gl.Ptr("desc")}
	if search != "" {
		opt.Search = gl.Ptr(search)
	}
	var page []*gl.Tag
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var err error
		var resp *gl.Response
		page, resp, err = c.gl.Tags.ListTags(projectID, opt, o...)
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tags of project %d: %w", projectID, err)
	}
	names := make([]string, 0, len(page))
	for _, t := range page {
		names = append(names, t.Name)
	}
	return names, nil
}
