package gitlab

import (
	"context"
	"fmt"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// Merge requests and their notes. Creations and merges are not retried
// after a 5xx or a broken connection (the merge request, the note or the
// merge may have happened): look (ListMergeRequests, GetMergeRequest)
// before sending again.

// Merge request states.
const (
	MergeRequestOpened = "opened"
	MergeRequestClosed = "closed"
	MergeRequestMerged = "merged"
)

// MergeRequest is the part of a GitLab merge request depsd uses.
type MergeRequest struct {
	IID, ProjectID             int64
	Title, Description         string
	SourceBranch, TargetBranch string
	// State is MergeRequestOpened, MergeRequestClosed, MergeRequestMerged
	// (or "locked", briefly, while GitLab merges).
	State  string
	Labels []string
	// SHA is the source branch's head commit (as it was when merged or
	// closed); MergeCommitSHA the merge's commit on the target branch.
	SHA, MergeCommitSHA string
	// AutoMerge: GitLab merges it when its head pipeline succeeds.
	AutoMerge bool
	// DetailedMergeStatus is GitLab's: mergeable, conflict,
	// ci_must_pass, ci_still_running, draft_status, not_open, ...
	DetailedMergeStatus string
	HasConflicts        bool
	RemoveSourceBranch  bool
	WebURL              string
	// HeadPipeline is the latest pipeline of SHA (a merge request or a
	// branch pipeline); nil when none, and in lists.
	HeadPipeline *Pipeline
	CreatedAt    time.Time
	UpdatedAt    time.Time
	MergedAt     time.Time
	ClosedAt     time.Time
}

func fromBasicMR(m *gl.BasicMergeRequest) MergeRequest {
	return MergeRequest{
		IID: m.IID, ProjectID: m.ProjectID, Title: m.Title, Description: m.Description,
		SourceBranch: m.SourceBranch, TargetBranch: m.TargetBranch, State: m.State, Labels: m.Labels,
		SHA: m.SHA, MergeCommitSHA: m.MergeCommitSHA, AutoMerge: m.MergeWhenPipelineSucceeds,
		DetailedMergeStatus: m.DetailedMergeStatus, HasConflicts: m.HasConflicts,
		RemoveSourceBranch: m.ForceRemoveSourceBranch, WebURL: m.WebURL,
		CreatedAt: timeOf(m.CreatedAt), UpdatedAt: timeOf(m.UpdatedAt), MergedAt: timeOf(m.MergedAt), ClosedAt: timeOf(m.ClosedAt),
	}
}

func fromMR(m *gl.MergeRequest) MergeRequest {
	out := fromBasicMR(&m.BasicMergeRequest)
	if m.HeadPipeline != nil {
		p := fromPipeline(m.HeadPipeline)
		out.HeadPipeline = &p
	}
	return out
}

// NewMergeRequest is a merge request to open.
type NewMergeRequest struct {
	SourceBranch, TargetBranch string
	Title, Description         string
	Labels                     []string
	// RemoveSourceBranch: GitLab deletes the source branch when it merges.
	RemoveSourceBranch bool
	Squash             bool
}

// CreateMergeRequest opens a merge request. An open one of the same
// branches is ErrConflict (409 "Another open merge request already exists
// for this source branch: !N"); a branch that does not exist, or the same
// branch on both sides, is permanent.
func (c *Client) CreateMergeRequest(ctx context.Context, projectID int64, n NewMergeRequest) (MergeRequest, error) {
	opt := &gl.CreateMergeRequestOptions{
		SourceBranch: gl.Ptr(n.SourceBranch), TargetBranch: gl.Ptr(n.TargetBranch), Title: gl.Ptr(n.Title),
	}
	if n.Description != "" {
		opt.Description = gl.Ptr(n.Description)
	}
	if len(n.Labels) > 0 {
		labels := gl.LabelOptions(n.Labels)
		opt.Labels = &labels
	}
	if n.RemoveSourceBranch {
		opt.RemoveSourceBranch = gl.Ptr(true)
	}
	if n.Squash {
		opt.Squash = gl.Ptr(true)
	}
	var m *gl.MergeRequest
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		m, resp, err = c.gl.MergeRequests.CreateMergeRequest(projectID, opt, o...)
		return resp, err
	})
	if err != nil {
		return MergeRequest{}, fmt.Errorf("open merge request %s → %s in project %d: %w", n.SourceBranch, n.TargetBranch, projectID, err)
	}
	c.log.Info("merge request opened", "project_id", projectID, "ref", n.SourceBranch, "iid", m.IID)
	return fromMR(m), nil
}

// MergeRequestFilter selects merge requests for ListMergeRequests.
type MergeRequestFilter struct {
	SourceBranch, TargetBranch string
	// State is MergeRequestOpened, MergeRequestClosed, MergeRequestMerged,
	// or "" for all.
	State string
	// Labels keeps those carrying every one of them.
	Labels []string
}

// ListMergeRequests returns a project's merge requests matching f, newest
// first, every page.
func (c *Client) ListMergeRequests(ctx context.Context, projectID int64, f MergeRequestFilter) ([]MergeRequest, error) {
	opt := &gl.ListProjectMergeRequestsOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}}
	if f.SourceBranch != "" {
		opt.SourceBranch = gl.Ptr(f.SourceBranch)
	}
	if f.TargetBranch != "" {
		opt.TargetBranch = gl.Ptr(f.TargetBranch)
	}
	if f.State != "" {
		opt.State = gl.Ptr(f.State)
	}
	if len(f.Labels) > 0 {
		labels := gl.LabelOptions(f.Labels)
		opt.Labels = &labels
	}
	var out []MergeRequest
	for {
		var page []*gl.BasicMergeRequest
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.MergeRequests.ListProjectMergeRequests(projectID, opt, o...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list merge requests of project %d: %w", projectID, err)
		}
		for _, m := range page {
			out = append(out, fromBasicMR(m))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// GetMergeRequest returns a merge request with its head pipeline; a
// missing one matches ErrNotFound.
func (c *Client) GetMergeRequest(ctx context.Context, projectID, iid int64) (MergeRequest, error) {
	var m *gl.MergeRequest
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		m, resp, err = c.gl.MergeRequests.GetMergeRequest(projectID, iid, nil, o...)
		return resp, err
	})
	if err != nil {
		return MergeRequest{}, fmt.Errorf("get merge request !%d of project %d: %w", iid, projectID, err)
	}
	return fromMR(m), nil
}

// MergeRequestUpdate changes a merge request: nil fields stay as they are.
type MergeRequestUpdate struct {
	Title, Description *string
	// Labels replaces the labels.
	Labels *[]string
}

// UpdateMergeRequest changes a merge request's title, description or
// labels.
func (c *Client) UpdateMergeRequest(ctx context.Context, projectID, iid int64, u MergeRequestUpdate) (MergeRequest, error) {
	opt := &gl.UpdateMergeRequestOptions{Title: u.Title, Description: u.Description}
	if u.Labels != nil {
		labels := gl.LabelOptions(*u.Labels)
		opt.Labels = &labels
	}
	return c.putMR(ctx, projectID, iid, opt, "update")
}

// CloseMergeRequest closes a merge request. Closing a merged or closed
// one changes nothing: the answer says its state.
func (c *Client) CloseMergeRequest(ctx context.Context, projectID, iid int64) (MergeRequest, error) {
	return c.putMR(ctx, projectID, iid, &gl.UpdateMergeRequestOptions{StateEvent: gl.Ptr("close")}, "close")
}

// ReopenMergeRequest reopens a closed merge request; an open one of the
// same branches is ErrConflict.
func (c *Client) ReopenMergeRequest(ctx context.Context, projectID, iid int64) (MergeRequest, error) {
	return c.putMR(ctx, projectID, iid, &gl.UpdateMergeRequestOptions{StateEvent: gl.Ptr("reopen")}, "reopen")
}

func (c *Client) putMR(ctx context.Context, projectID, iid int64, opt *gl.UpdateMergeRequestOptions, what string) (MergeRequest, error) {
	var m *gl.MergeRequest
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		m, resp, err = c.gl.MergeRequests.UpdateMergeRequest(projectID, iid, opt, o...)
		return resp, err
	})
	if err != nil {
		return MergeRequest{}, fmt.Errorf("%s merge request !%d of project %d: %w", what, iid, projectID, err)
	}
	return fromMR(m), nil
}

// MergeOptions say how to merge.
type MergeOptions struct {
	// SHA, when set, must be the source branch's head (else ErrConflict):
	// what was reviewed is what is merged.
	SHA string
	// AutoMerge merges when the head pipeline succeeds (GitLab's auto-merge,
	// "merge when pipeline succeeds"): the answer is still open, with
	// AutoMerge set; without a running pipeline it is ErrNotMergeable.
	AutoMerge bool
	// RemoveSourceBranch deletes the source branch once merged.
	RemoveSourceBranch bool
}

// MergeMergeRequest merges a merge request now, or when its pipeline
// succeeds (MergeOptions.AutoMerge). A token whose user may not merge into
// the target branch is ErrForbidden (GitLab answers 401); a merge request
// that cannot be merged now (closed, merged, a draft, a failing check, a
// conflict) is ErrNotMergeable; a stale SHA is ErrConflict.
func (c *Client) MergeMergeRequest(ctx context.Context, projectID, iid int64, mo MergeOptions) (MergeRequest, error) {
	opt := &gl.AcceptMergeRequestOptions{}
	if mo.SHA != "" {
		opt.SHA = gl.Ptr(mo.SHA)
	}
	if mo.AutoMerge {
		// auto_merge is GitLab 17.11's name; older ones know only this.
		opt.MergeWhenPipelineSucceeds = gl.Ptr(true)
	}
	if mo.RemoveSourceBranch {
		opt.ShouldRemoveSourceBranch = gl.Ptr(true)
	}
	var m *gl.MergeRequest
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		m, resp, err = c.gl.MergeRequests.AcceptMergeRequest(projectID, iid, opt, o...)
		return resp, err
	})
	if err != nil {
		return MergeRequest{}, fmt.Errorf("merge merge request !%d of project %d: %w", iid, projectID, err)
	}
	c.log.Info("merge request merge asked", "project_id", projectID, "iid", iid, "auto_merge", mo.AutoMerge, "state", m.State)
	return fromMR(m), nil
}

// Note is a merge request note.
type Note struct {
	ID   int64
	Body string
	// Author is the author's username; System marks GitLab's own notes
	// ("merged", "added 1 commit", ...).
	Author    string
	System    bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

func fromNote(n *gl.Note) Note {
	return Note{ID: n.ID, Body: n.Body, Author: n.Author.Username, System: n.System,
		CreatedAt: timeOf(n.CreatedAt), UpdatedAt: timeOf(n.UpdatedAt)}
}

// CreateMergeRequestNote adds a note to a merge request.
func (c *Client) CreateMergeRequestNote(ctx context.Context, projectID, iid int64, body string) (Note, error) {
	var n *gl.Note
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		n, resp, err = c.gl.Notes.CreateMergeRequestNote(projectID, iid, &gl.CreateMergeRequestNoteOptions{Body: gl.Ptr(body)}, o...)
		return resp, err
	})
	if err != nil {
		return Note{}, fmt.Errorf("add a note to merge request !%d of project %d: %w", iid, projectID, err)
	}
	return fromNote(n), nil
}

// UpdateMergeRequestNote replaces a note's body; another user's note or
// a system note is ErrForbidden, a missing one ErrNotFound.
func (c *Client) UpdateMergeRequestNote(ctx context.Context, projectID, iid, noteID int64, body string) (Note, error) {
	var n *gl.Note
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		n, resp, err = c.gl.Notes.UpdateMergeRequestNote(projectID, iid, noteID, &gl.UpdateMergeRequestNoteOptions{Body: gl.Ptr(body)}, o...)
		return resp, err
	})
	if err != nil {
		return Note{}, fmt.Errorf("update note %d of merge request !%d of project %d: %w", noteID, iid, projectID, err)
	}
	return fromNote(n), nil
}

// ListMergeRequestNotes returns a merge request's notes, system notes
// included, oldest first, every page.
func (c *Client) ListMergeRequestNotes(ctx context.Context, projectID, iid int64) ([]Note, error) {
	opt := &gl.ListMergeRequestNotesOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1},
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc")}
	var out []Note
	for {
		var page []*gl.Note
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.Notes.ListMergeRequestNotes(projectID, iid, opt, o...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list notes of merge request !%d of project %d: %w", iid, projectID, err)
		}
		for _, n := range page {
			out = append(out, fromNote(n))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}
