package gitlab

import (
	"context"
	"fmt"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// HeadState is what a caller keeps per project between scans so that the
// next scan can skip a project whose default branch provably did not move.
type HeadState struct {
	Branch string // the default branch the files were read from
	// Version identifies what was read at that branch (the scan keeps a
	// digest of the dependency files' blob ids); empty: nothing known.
	Version        string
	LastActivityAt time.Time // last_activity_at as listed at that scan
	CheckedAt      time.Time // when Version was known current (client clock)
}

// Unchanged reports whether known is still current for p without asking
// GitLab. GitLab moves last_activity_at on a push only when it is older
// than an hour, so an equal value proves nothing if it was recent when the
// branch was checked; it proves "no push since" only when it was already
// older than Config.ActivityWindow then. Proof: a push at T after the check
// at S would have moved it unless it was later than T-1h > S-1h.
func (c *Client) Unchanged(p Project, known HeadState) bool {
	return known.Version != "" &&
		known.Branch == p.DefaultBranch &&
		!p.LastActivityAt.IsZero() &&
		known.LastActivityAt.Equal(p.LastActivityAt) &&
		p.LastActivityAt.Before(known.CheckedAt.Add(-c.cfg.ActivityWindow))
}

// HeadCommit returns the id of the head commit of a branch.
func (c *Client) HeadCommit(ctx context.Context, projectID int64, branch string) (string, error) {
	var b *gl.Branch
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		b, resp, err = c.gl.Branches.GetBranch(projectID, branch, o...)
		return resp, err
	})
	if err != nil {
		return "", fmt.Errorf("get branch %s of project %d: %w", branch, projectID, err)
	}
	if b.Commit == nil || b.Commit.ID == "" {
		return "", fmt.Errorf("get branch %s of project %d: answer has no commit", branch, projectID)
	}
	return b.Commit.ID, nil
}
