package gitlab

import "time"

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
