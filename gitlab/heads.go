package gitlab

import (
	"context"
	"errors"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
	"golang.org/x/sync/errgroup"
	"time"
)

// HeadState is what a caller keeps per project between scans so the next
// scan can skip asking for an unchanged default branch head.
type HeadState struct {
	Branch         string    // the default branch the commit belongs to
	Commit         string    // its head commit id
	LastActivityAt time.Time // last_activity_at as listed at that scan
	CheckedAt      time.Time // when Commit was known current (client clock)
}

// Head returns the project's state to remember for the next scan.
func (p Project) Head() HeadState {
	return HeadState{Branch: p.DefaultBranch, Commit: p.HeadCommit, LastActivityAt: p.LastActivityAt, CheckedAt: p.HeadCheckedAt}
}

// unchanged reports whether the head in known is still current for p
// without asking GitLab. GitLab moves last_activity_at on a push only when
// it is older than an hour, so an equal value proves nothing if it was
// recent when the head was checked; it proves "no push since" only when it
// was already older than the window then. Proof: a push at T after the check
// at S would have moved it unless it was later than T-1h > S-1h.
func (c *Client) unchanged(p Project, known HeadState) bool {
	return known.Commit != "" &&
		known.Branch == p.DefaultBranch &&
		!p.LastActivityAt.IsZero() &&
		known.LastActivityAt.Equal(p.LastActivityAt) &&
		p.LastActivityAt.Before(known.CheckedAt.Add(-c.cfg.ActivityWindow))
}

// FillHeadCommits sets HeadCommit and HeadCheckedAt of each project. A
// project whose known state proves its head unchanged (see the package doc)
// keeps the known commit at no cost; the others cost one request each
// (GET /projects/:id/repository/branches/:branch), in parallel within the
// client's bounds. It returns how many heads were fetched. A project whose
// branch vanished meanwhile (404) is left with an empty HeadCommit.
func (c *Client) FillHeadCommits(ctx context.Context, projects []Project, known map[int64]HeadState) (int, error) {
	now := c.cfg.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	fetched := 0
	for i := range projects {
		p := &projects[i]
		if k, ok := known[p.ID]; ok && c.unchanged(*p, k) {
			p.HeadCommit, p.HeadCheckedAt = k.Commit, now
			continue
		}
		fetched++
		g.Go(func() error {
			sha, err := c.HeadCommit(gctx, p.ID, p.DefaultBranch)
			switch {
			case errors.Is(err, ErrNotFound):
				c.log.Warn("default branch not found", "project", p.Path, "project_id", p.ID, "ref", p.DefaultBranch)
				p.HeadCommit, p.HeadCheckedAt = "", time.Time{}
			case err != nil:
				return fmt.Errorf("head of %s: %w", p.Path, err)
			default:
				p.HeadCommit, p.HeadCheckedAt = sha, now
			}
			return nil
		})
	}
	return fetched, g.Wait()
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
