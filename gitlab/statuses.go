package gitlab

import (
	"context"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// CommitStatus is an external commit status (a job GitLab shows on a
// commit and in its pipeline).
type CommitStatus struct {
	ID        int64
	SHA, Ref  string
	Name      string // GitLab's name, alias context
	Status    string // pending, running, success, failed, canceled, skipped
	TargetURL string
	// Description is the one line GitLab shows beside the status.
	Description string
	PipelineID  int64
	Author      string // username of who set it
}

// StatusOptions are what SetCommitStatus sends besides the state.
type StatusOptions struct {
	// State is pending, running, success, failed, canceled or skipped.
	State string
	// Name tells the status apart from others on the commit ("depsd/chain").
	Name string
	// Ref is the branch or tag; empty: GitLab takes the newest pipeline's
	// ref, else the first branch holding the commit.
	Ref         string
	TargetURL   string
	Description string
	// PipelineID puts the status on that pipeline of the commit; 0: the
	// newest pipeline of the commit and ref (an external one is made when
	// there is none).
	PipelineID int64
}

// SetCommitStatus sets an external commit status
// (POST /projects/:id/statuses/:sha, Developer). GitLab moves a status of
// the same name, ref and user that is still pending or running, else
// makes a new one, and recomputes the commit's pipeline with it. A state
// GitLab's state machine does not allow from the current one (running
// twice, pending after running) is ErrStatusTransition, permanent: the
// status is as it was. A POST is not retried after a 5xx or a broken
// connection (see call): the caller may read ListCommitStatuses first.
func (c *Client) SetCommitStatus(ctx context.Context, projectID int64, sha string, o StatusOptions) (CommitStatus, error) {
	opt := &gl.SetCommitStatusOptions{State: gl.BuildStateValue(o.State)}
	for _, f := range []struct {
		dst **string
		v   string
	}{{&opt.Name, o.Name}, {&opt.Ref, o.Ref}, {&opt.TargetURL, o.TargetURL}, {&opt.Description, o.Description}} {
		if f.v != "" {
			*f.dst = gl.Ptr(f.v)
		}
	}
	if o.PipelineID != 0 {
		opt.PipelineID = gl.Ptr(o.PipelineID)
	}
	var st *gl.CommitStatus
	err := c.call(ctx, false, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		st, resp, err = c.gl.Commits.SetCommitStatus(projectID, sha, opt, ro...)
		return resp, err
	})
	if err != nil {
		return CommitStatus{}, fmt.Errorf("set commit status %s of %s in project %d to %s: %w", o.Name, sha, projectID, o.State, err)
	}
	return fromCommitStatus(st), nil
}

func fromCommitStatus(s *gl.CommitStatus) CommitStatus {
	return CommitStatus{ID: s.ID, SHA: s.SHA, Ref: s.Ref, Name: s.Name, Status: s.Status, TargetURL: s.TargetURL,
		Description: s.Description, PipelineID: s.PipelineID, Author: s.Author.Username}
}

// StatusFilter selects statuses for ListCommitStatuses.
type StatusFilter struct {
	Ref, Name string
	// All includes statuses a newer one of the same name replaced.
	All bool
}

// ListCommitStatuses returns a commit's statuses
// (GET /projects/:id/repository/commits/:sha/statuses), oldest first.
func (c *Client) ListCommitStatuses(ctx context.Context, projectID int64, sha string, f StatusFilter) ([]CommitStatus, error) {
	opt := &gl.GetCommitStatusesOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}}
	if f.Ref != "" {
		opt.Ref = gl.Ptr(f.Ref)
	}
	if f.Name != "" {
		opt.Name = gl.Ptr(f.Name)
	}
	if f.All {
		opt.All = gl.Ptr(true)
	}
	var out []CommitStatus
	for {
		var page []*gl.CommitStatus
		var resp *gl.Response
		err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.Commits.GetCommitStatuses(projectID, sha, opt, ro...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list commit statuses of %s in project %d: %w", sha, projectID, err)
		}
		for _, s := range page {
			out = append(out, fromCommitStatus(s))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}
