package gitlab

import (
	"context"
	"errors"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// AccessLevel is a role's access level on a project (Gitlab::Access).
type AccessLevel int

// GitLab's roles.
const (
	NoAccess   AccessLevel = 0
	Guest      AccessLevel = 10
	Reporter   AccessLevel = 20
	Developer  AccessLevel = 30
	Maintainer AccessLevel = 40
	Owner      AccessLevel = 50
)

// VisibleProject is a project the token's user may read.
type VisibleProject struct {
	ID     int64
	Path   string // path_with_namespace
	WebURL string
}

// VisibleFilter selects what ListVisibleProjects lists.
type VisibleFilter struct {
	// Membership keeps the projects the user is a member of (directly, by
	// a group or a share); otherwise public and internal projects count
	// too.
	Membership bool
	// MinAccessLevel keeps the projects where the user has at least this
	// role (implies membership).
	MinAccessLevel AccessLevel
}

// ListVisibleProjects returns the projects the token's user may read, in
// id order (GET /projects, keyset pages of simple projects): a client made
// with WithToken for a person lists what GitLab shows that person. It
// costs one request per page of 100.
func (c *Client) ListVisibleProjects(ctx context.Context, f VisibleFilter) ([]VisibleProject, error) {
	opt := &gl.ListProjectsOptions{
		ListOptions: gl.ListOptions{Pagination: "keyset", PerPage: int64(c.cfg.PerPage), OrderBy: "id", Sort: "asc"},
		Simple:      gl.Ptr(true),
	}
	if f.Membership {
		opt.Membership = gl.Ptr(true)
	}
	if f.MinAccessLevel > 0 {
		opt.MinAccessLevel = gl.Ptr(gl.AccessLevelValue(f.MinAccessLevel))
	}
	var out []VisibleProject
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
			return nil, fmt.Errorf("list the projects the token's user may see: %w", err)
		}
		for _, p := range ps {
			out = append(out, VisibleProject{ID: p.ID, Path: p.PathWithNamespace, WebURL: p.WebURL})
		}
		if resp.NextLink == "" || len(ps) == 0 {
			return out, nil
		}
		next = resp.NextLink
	}
}

// ProjectMemberAccess returns a user's access level on a project, inherited
// memberships included (GET /projects/:id/members/all/:user_id): what
// decides whether the person may act on it (Developer and up). A user who
// is not a member, or a project the token's user cannot see, is NoAccess.
func (c *Client) ProjectMemberAccess(ctx context.Context, projectID, userID int64) (AccessLevel, error) {
	var m *gl.ProjectMember
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		m, resp, err = c.gl.ProjectMembers.GetInheritedProjectMember(projectID, userID, o...)
		return resp, err
	})
	if errors.Is(err, ErrNotFound) {
		return NoAccess, nil
	}
	if err != nil {
		return NoAccess, fmt.Errorf("get the membership of user %d in project %d: %w", userID, projectID, err)
	}
	return AccessLevel(m.AccessLevel), nil
}
