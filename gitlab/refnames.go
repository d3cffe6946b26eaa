package gitlab

import (
	"context"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// BranchNames returns the names of every branch of the project
// (ListBranches): one request for up to PerPage branches. search, when
// set, is GitLab's branch filter (a substring, ^ anchoring its start and $
// its end).
func (c *Client) BranchNames(ctx context.Context, projectID int64, search string) ([]string, error) {
	branches, err := c.ListBranches(ctx, projectID, search)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(branches))
	for i, b := range branches {
		names[i] = b.Name
	}
	return names, nil
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
