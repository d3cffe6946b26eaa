package gitlab

import (
	"context"
	"fmt"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// Repository refs and commits: tags, branches, a file with the commit that
// last changed it, and commits made of file actions. Creations are POSTs:
// a 5xx or a broken connection is not retried (the ref or commit may
// exist); look before sending again. A ref or commit that already exists,
// or a file changed since it was read, is ErrConflict.

// Tag is a repository tag.
type Tag struct {
	Name string
	// CommitSHA is the commit the tag points at.
	CommitSHA string
	// Message is an annotated tag's message; "" for a lightweight tag.
	Message string
	// CommittedAt is the date of the tag's commit.
	CommittedAt time.Time
}

func fromTag(t *gl.Tag) Tag {
	out := Tag{Name: t.Name, Message: t.Message}
	if t.Commit != nil {
		out.CommitSHA, out.CommittedAt = t.Commit.ID, timeOf(t.Commit.CommittedDate)
	}
	return out
}

// Tag orders for ListTags.
const (
	// TagsByVersion orders by version, highest first (git's
	// version:refname: v1.10.0 after v1.9.0).
	TagsByVersion = "version"
	// TagsByName orders by name, last first.
	TagsByName = "name"
	// TagsByUpdated orders by the tagged commit's date, newest first:
	// GitLab's default.
	TagsByUpdated = "updated"
)

// ListTags returns every tag of a project whose name matches search
// (GitLab's: case-insensitive; a substring, or with ^ and $ anchors, and *
// wildcards, "^v" for the tags starting with v; "" for all), ordered by
// orderBy (TagsByVersion, TagsByName, TagsByUpdated; "" is
// TagsByUpdated), descending. It reads every page: 1 request per 100 tags.
func (c *Client) ListTags(ctx context.Context, projectID int64, search, orderBy string) ([]Tag, error) {
	opt := &gl.ListTagsOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}, Sort: gl.Ptr("desc")}
	if search != "" {
		opt.Search = gl.Ptr(search)
	}
	if orderBy != "" {
		opt.OrderBy = gl.Ptr(orderBy)
	}
	var out []Tag
	for {
		var page []*gl.Tag
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.Tags.ListTags(projectID, opt, o...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list tags of project %d: %w", projectID, err)
		}
		for _, t := range page {
			out = append(out, fromTag(t))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// GetTag returns a tag; a missing one matches ErrNotFound.
func (c *Client) GetTag(ctx context.Context, projectID int64, name string) (Tag, error) {
	var t *gl.Tag
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		t, resp, err = c.gl.Tags.GetTag(projectID, name, o...)
		return resp, err
	})
	if err != nil {
		return Tag{}, fmt.Errorf("get tag %s of project %d: %w", name, projectID, err)
	}
	return fromTag(t), nil
}

// CreateTag tags ref (a branch, tag or commit id), annotated when message
// is not empty. A tag of that name is ErrConflict ("Tag v1 already
// exists"); a ref that does not exist is a permanent 400.
func (c *Client) CreateTag(ctx context.Context, projectID int64, name, ref, message string) (Tag, error) {
	opt := &gl.CreateTagOptions{TagName: gl.Ptr(name), Ref: gl.Ptr(ref)}
	if message != "" {
		opt.Message = gl.Ptr(message)
	}
	var t *gl.Tag
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		t, resp, err = c.gl.Tags.CreateTag(projectID, opt, o...)
		return resp, err
	})
	if err != nil {
		return Tag{}, fmt.Errorf("create tag %s at %s in project %d: %w", name, ref, projectID, err)
	}
	c.log.Info("tag created", "project_id", projectID, "ref", name)
	return fromTag(t), nil
}

// DeleteTag deletes a tag; a missing one matches ErrNotFound.
func (c *Client) DeleteTag(ctx context.Context, projectID int64, name string) error {
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		return c.gl.Tags.DeleteTag(projectID, name, o...)
	})
	if err != nil {
		return fmt.Errorf("delete tag %s of project %d: %w", name, projectID, err)
	}
	return nil
}

// Branch is a repository branch as the token's user sees it.
type Branch struct {
	Name      string
	CommitSHA string // its head
	Default   bool
	// Protected: a protected-branch rule matches it. CanPush says whether
	// the token's user may push to it (a Developer may not push to a
	// branch only Maintainers may).
	Protected, CanPush bool
	// DevelopersCanPush and DevelopersCanMerge: a rule lets Developers.
	DevelopersCanPush, DevelopersCanMerge bool
	// Merged: its head is in the default branch (and is not its head).
	Merged bool
}

func fromBranch(b *gl.Branch) Branch {
	out := Branch{Name: b.Name, Default: b.Default, Protected: b.Protected, CanPush: b.CanPush,
		DevelopersCanPush: b.DevelopersCanPush, DevelopersCanMerge: b.DevelopersCanMerge, Merged: b.Merged}
	if b.Commit != nil {
		out.CommitSHA = b.Commit.ID
	}
	return out
}

// ListBranches returns every branch of a project whose name matches
// search (as ListTags' search; "" for all), by name. It reads every page.
func (c *Client) ListBranches(ctx context.Context, projectID int64, search string) ([]Branch, error) {
	opt := &gl.ListBranchesOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}}
	if search != "" {
		opt.Search = gl.Ptr(search)
	}
	var out []Branch
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
			out = append(out, fromBranch(b))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// GetBranch returns a branch; a missing one matches ErrNotFound.
func (c *Client) GetBranch(ctx context.Context, projectID int64, name string) (Branch, error) {
	var b *gl.Branch
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		b, resp, err = c.gl.Branches.GetBranch(projectID, name, o...)
		return resp, err
	})
	if err != nil {
		return Branch{}, fmt.Errorf("get branch %s of project %d: %w", name, projectID, err)
	}
	return fromBranch(b), nil
}

// CreateBranch creates a branch at ref (a branch, tag or commit id). An
// existing branch is ErrConflict; a ref that does not exist or an invalid
// name is a permanent 400.
func (c *Client) CreateBranch(ctx context.Context, projectID int64, name, ref string) (Branch, error) {
	var b *gl.Branch
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		b, resp, err = c.gl.Branches.CreateBranch(projectID, &gl.CreateBranchOptions{Branch: gl.Ptr(name), Ref: gl.Ptr(ref)}, o...)
		return resp, err
	})
	if err != nil {
		return Branch{}, fmt.Errorf("create branch %s at %s in project %d: %w", name, ref, projectID, err)
	}
	c.log.Info("branch created", "project_id", projectID, "ref", name)
	return fromBranch(b), nil
}

// DeleteBranch deletes a branch. A missing one matches ErrNotFound; the
// default branch, and a protected one unless the token's user is a
// Maintainer, are permanent 400s.
func (c *Client) DeleteBranch(ctx context.Context, projectID int64, name string) error {
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		return c.gl.Branches.DeleteBranch(projectID, name, o...)
	})
	if err != nil {
		return fmt.Errorf("delete branch %s of project %d: %w", name, projectID, err)
	}
	return nil
}

// File is a file read at a ref.
type File struct {
	Content []byte
	// CommitSHA is the ref's head; LastCommitSHA the last commit that
	// changed the file, what CommitAction.LastCommitID wants.
	CommitSHA, LastCommitSHA string
}

// ReadFile reads path at ref (a branch, tag or commit id; "" for the
// default branch) with the commit that last changed it
// (GET /projects/:id/repository/files/:path/raw). A missing file or ref
// matches ErrNotFound.
func (c *Client) ReadFile(ctx context.Context, projectID int64, path, ref string) (File, error) {
	opt := &gl.GetRawFileOptions{}
	if ref != "" {
		opt.Ref = gl.Ptr(ref)
	}
	var out File
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		data, resp, err := c.gl.RepositoryFiles.GetRawFile(projectID, path, opt, o...)
		if err == nil {
			out = File{Content: data, CommitSHA: resp.Header.Get("X-Gitlab-Commit-Id"), LastCommitSHA: resp.Header.Get("X-Gitlab-Last-Commit-Id")}
		}
		return resp, err
	})
	if err != nil {
		return File{}, fmt.Errorf("read %s at %q in project %d: %w", path, ref, projectID, err)
	}
	return out, nil
}

// Commit actions.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
	ActionMove   = "move"
)

// CommitAction is one change of a commit.
type CommitAction struct {
	// Action is ActionCreate, ActionUpdate, ActionDelete or ActionMove.
	Action string
	// Path is the file; PreviousPath the file a move moves.
	Path, PreviousPath string
	// Content is the new content (create, update; a move keeps the old
	// content unless Content is set).
	Content string
	// LastCommitID, when set, makes GitLab refuse the commit (ErrConflict)
	// if the file changed since that commit (File.LastCommitSHA).
	LastCommitID string
}

// CommitRequest is a commit to make on Branch.
type CommitRequest struct {
	Branch  string
	Message string
	// StartBranch is where a new Branch starts; with Force, an existing
	// Branch is replaced by StartBranch plus this commit.
	StartBranch string
	Force       bool
	Actions     []CommitAction
	// AuthorName and AuthorEmail; the token's user when empty.
	AuthorName, AuthorEmail string
}

// Commit is a commit GitLab made.
type Commit struct {
	SHA        string
	Title      string
	Message    string
	ParentSHAs []string
	AuthorName string
	WebURL     string
	CreatedAt  time.Time
}

// CreateCommit commits the request's actions (POST
// /projects/:id/repository/commits). A branch the token's user may not push
// to is ErrForbidden ("You are not allowed to push into this branch": a
// protected branch needs a Maintainer, or no one may push); a Branch that
// exists while StartBranch differs (without Force), a file created that
// exists or a file changed since LastCommitID are ErrConflict; a file
// updated that does not exist, a missing StartBranch, and a force push onto
// a protected branch are permanent 400s.
func (c *Client) CreateCommit(ctx context.Context, projectID int64, r CommitRequest) (Commit, error) {
	opt := &gl.CreateCommitOptions{Branch: gl.Ptr(r.Branch), CommitMessage: gl.Ptr(r.Message)}
	if r.StartBranch != "" {
		opt.StartBranch = gl.Ptr(r.StartBranch)
	}
	if r.Force {
		opt.Force = gl.Ptr(true)
	}
	if r.AuthorName != "" {
		opt.AuthorName, opt.AuthorEmail = gl.Ptr(r.AuthorName), gl.Ptr(r.AuthorEmail)
	}
	for _, a := range r.Actions {
		ao := &gl.CommitActionOptions{Action: gl.Ptr(gl.FileActionValue(a.Action)), FilePath: gl.Ptr(a.Path)}
		if a.PreviousPath != "" {
			ao.PreviousPath = gl.Ptr(a.PreviousPath)
		}
		if a.Action == ActionCreate || a.Action == ActionUpdate || (a.Action == ActionMove && a.Content != "") {
			ao.Content = gl.Ptr(a.Content)
		}
		if a.LastCommitID != "" {
			ao.LastCommitID = gl.Ptr(a.LastCommitID)
		}
		opt.Actions = append(opt.Actions, ao)
	}
	var cm *gl.Commit
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		cm, resp, err = c.gl.Commits.CreateCommit(projectID, opt, o...)
		return resp, err
	})
	if err != nil {
		return Commit{}, fmt.Errorf("commit to %s in project %d: %w", r.Branch, projectID, err)
	}
	c.log.Info("commit created", "project_id", projectID, "ref", r.Branch, "sha", cm.ID)
	return Commit{SHA: cm.ID, Title: cm.Title, Message: cm.Message, ParentSHAs: cm.ParentIDs, AuthorName: cm.AuthorName,
		WebURL: cm.WebURL, CreatedAt: timeOf(cm.CreatedAt)}, nil
}
