package gitlab

import (
	"context"
	"fmt"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// RegistryRepository is a container repository of a project in GitLab's
// registry (GET /projects/:id/registry/repositories).
type RegistryRepository struct {
	ID        int64
	ProjectID int64
	Name      string // "" for the project's own repository
	Path      string // e.g. g/app or g/app/builder
	Location  string // e.g. registry.example.com/g/app
	TagsCount int64
}

// RegistryTag is a tag of a container repository; Digest, Revision,
// TotalSize and CreatedAt only from GetRegistryTag.
type RegistryTag struct {
	Name      string
	Location  string // host/path:tag
	Digest    string // the manifest's (or index's) digest
	Revision  string // the config's digest, hex
	TotalSize int64
	CreatedAt time.Time
}

// ListRegistryRepositories returns a project's container repositories,
// each with its tag count (Reporter, or anyone on a public project).
func (c *Client) ListRegistryRepositories(ctx context.Context, projectID int64) ([]RegistryRepository, error) {
	opt := &gl.ListProjectRegistryRepositoriesOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}, TagsCount: gl.Ptr(true)}
	var out []RegistryRepository
	for {
		var page []*gl.RegistryRepository
		var resp *gl.Response
		err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.ContainerRegistry.ListProjectRegistryRepositories(projectID, opt, ro...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list registry repositories of project %d: %w", projectID, err)
		}
		for _, r := range page {
			out = append(out, RegistryRepository{ID: r.ID, ProjectID: r.ProjectID, Name: r.Name, Path: r.Path,
				Location: r.Location, TagsCount: r.TagsCount})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// ListRegistryTags returns the tags of a container repository by name.
func (c *Client) ListRegistryTags(ctx context.Context, projectID, repositoryID int64) ([]RegistryTag, error) {
	opt := &gl.ListRegistryRepositoryTagsOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}}
	var out []RegistryTag
	for {
		var page []*gl.RegistryRepositoryTag
		var resp *gl.Response
		err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.ContainerRegistry.ListRegistryRepositoryTags(projectID, repositoryID, opt, ro...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list tags of registry repository %d of project %d: %w", repositoryID, projectID, err)
		}
		for _, t := range page {
			out = append(out, fromRegistryTag(t))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

func fromRegistryTag(t *gl.RegistryRepositoryTag) RegistryTag {
	return RegistryTag{Name: t.Name, Location: t.Location, Digest: t.Digest, Revision: t.Revision,
		TotalSize: t.TotalSize, CreatedAt: timeOf(t.CreatedAt)}
}

// GetRegistryTag returns a tag with its digest; a tag that does not exist
// matches ErrNotFound.
func (c *Client) GetRegistryTag(ctx context.Context, projectID, repositoryID int64, tag string) (RegistryTag, error) {
	var t *gl.RegistryRepositoryTag
	err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		t, resp, err = c.gl.ContainerRegistry.GetRegistryRepositoryTagDetail(projectID, repositoryID, tag, ro...)
		return resp, err
	})
	if err != nil {
		return RegistryTag{}, fmt.Errorf("get tag %s of registry repository %d of project %d: %w", tag, repositoryID, projectID, err)
	}
	return fromRegistryTag(t), nil
}

// DeleteRegistryTag deletes one tag of a container repository (Developer);
// other tags of the same digest stay. A tag already gone matches
// ErrNotFound; the token's user below Developer is ErrForbidden.
func (c *Client) DeleteRegistryTag(ctx context.Context, projectID, repositoryID int64, tag string) error {
	err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
		return c.gl.ContainerRegistry.DeleteRegistryRepositoryTag(projectID, repositoryID, tag, ro...)
	})
	if err != nil {
		return fmt.Errorf("delete tag %s of registry repository %d of project %d: %w", tag, repositoryID, projectID, err)
	}
	return nil
}
