package chain

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// A chain started by a pipeline's success shows its progress on that
// pipeline's commit in GitLab: an external commit status named StatusName,
// on the root's pipeline (pipeline_id), whose link opens the chain's page
// (ChainStatusOptions). It is kept exactly once across crashes, the way the
// outbox keeps pipeline creations:
//
//   - what the status should show is derived from the chain in the
//     transactions that change the chain (wantStatuses) and stored with it
//     (Tx.WantChainStatus: a row per root pipeline, its want counted by
//     WantSeq);
//   - a sender (SendStatuses; the daemon runs it on the leader) claims a
//     due row with a lease and marks it in doubt before it posts: GitLab
//     may show the post from then on whatever happens to depsd. It records
//     what GitLab answered; a row still in doubt at the next claim (a
//     crash, a 5xx, a lost answer) is read from GitLab first
//     (ListCommitStatuses) and the next post goes on from what GitLab
//     shows;
//   - GitLab's state machine (a status still pending or running is moved,
//     else a new one is made) refuses running twice and pending after
//     pending or running (400): commitStep never asks for those, and a
//     refusal is reported, read back and given up after a few attempts,
//     never retried forever;
//   - a row's posts are at least ChainStatusOptions.Interval apart: the
//     changes of a chain between two posts are one post (coalesced), and
//     the posts go through the GitLab client's limits at background
//     priority, behind pipeline creations.
//
// Chains started by a rebuild, a schedule or a new digest have no commit
// and no status. The description names a failed member only where every
// viewer of the root's commit may see it (mayName).

// StatusName is the name of the commit status depsd keeps on a chain's
// root commit.
const StatusName = "depsd/chain"

// CommitState is the state of a commit status, in GitLab's words.
type CommitState string

const (
	CommitPending  CommitState = "pending"
	CommitRunning  CommitState = "running"
	CommitSuccess  CommitState = "success"
	CommitFailed   CommitState = "failed"
	CommitCanceled CommitState = "canceled"
)

// CommitStates are the states depsd sets a chain's commit status to, in
// the order of its life: what metrics and views list.
func CommitStates() []CommitState {
	return []CommitState{CommitPending, CommitRunning, CommitSuccess, CommitFailed, CommitCanceled}
}

// StatusGitLab is the part of the GitLab API the status sender uses;
// *gitlab.Client implements it. SetCommitStatus is not retried after a 5xx
// or a broken connection (the status may have moved): the sender reads
// ListCommitStatuses before its next post. CurrentUser is the token's user,
// whose statuses are depsd's (GitLab keeps one per name, ref and user); it
// may be cached. Calls may be concurrent.
type StatusGitLab interface {
	SetCommitStatus(ctx context.Context, projectID int64, sha string, o gitlab.StatusOptions) (gitlab.CommitStatus, error)
	ListCommitStatuses(ctx context.Context, projectID int64, sha string, f gitlab.StatusFilter) ([]gitlab.CommitStatus, error)
	CurrentUser(ctx context.Context) (gitlab.User, error)
}

// ChainStatusOptions turn on the chains' commit statuses (Config.Statuses).
type ChainStatusOptions struct {
	GitLab StatusGitLab // required
	// Interval is the least time between two posts of one status: the
	// changes in between are coalesced. Default 5 s.
	Interval time.Duration
	// ChainURL is the link of a chain's page (the status's target_url);
	// nil, or "", sends none.
	ChainURL func(chainID int64) string
}

// ChainStatus is the commit status of one pipeline that started a chain:
// what the chain wants it to show, and what the sender knows GitLab shows.
type ChainStatus struct {
	PipelineID int64 // the root's pipeline, which the status lands on: the key
	// Name is the status's name: StatusName, or ValidationStatusName for
	// a validation's (on the merge request pipeline).
	Name      string
	ProjectID int64  // the root's project
	Project   string // the root node
	SHA, Ref  string // the pipeline's commit and ref
	// ChainID is the chain holding the root's reason now (a merge moves
	// it into the older chain).
	ChainID int64
	// Want and WantDesc are what the chain says the status should show;
	// WantSeq grows with every change of them.
	Want     CommitState
	WantDesc string
	WantSeq  int64
	// DoneSeq is the WantSeq the sender last dealt with (posted, found
	// shown already, or gave up on): the status is due while it is less
	// than WantSeq.
	DoneSeq int64
	// Have and HaveDesc are what GitLab is known to show ("": nothing
	// yet).
	Have     CommitState
	HaveDesc string
	// Doubt: a post was claimed and its outcome is not recorded, so
	// GitLab may show it; the next send reads the commit's statuses first.
	Doubt      bool
	NextSendAt time.Time // not sent before (coalescing, backoff)
	LeaseUntil time.Time // the claim of a sender, as for an action
	ClaimedBy  string
	Attempts   int // failed posts of the current want
	LastError  string
	CreatedAt  time.Time
	SentAt     time.Time // the last post GitLab accepted
}

// Due reports whether the sender has something to do for s at now.
func (s ChainStatus) Due(now time.Time) bool {
	return s.DoneSeq < s.WantSeq && !s.NextSendAt.After(now)
}

// commitStep returns the state to post to move a status GitLab shows as
// have (with description haveDesc; "" when there is none) to want, and
// whether to post at all. A status still pending or running can move
// forward only (GitLab's state machine refuses running twice and pending
// after pending or running, with a 400): its description then waits for
// the next state. A final status or none takes any state, as a new status.
func commitStep(have CommitState, haveDesc string, want CommitState, wantDesc string) (CommitState, bool) {
	switch {
	case want == "":
		return "", false
	case have == want && haveDesc == wantDesc:
		return "", false
	case have == CommitPending && want == CommitPending:
		return "", false
	case have == CommitRunning && (want == CommitPending || want == CommitRunning):
		return "", false
	}
	return want, true
}

// maxStatusDescription is GitLab's limit on a status's description.
const maxStatusDescription = 255

// statusCounts is what a chain's commit status says of its members.
type statusCounts struct {
	total, rebuilt, skipped, building, blocked, unfinished int
	broken                                                 []*Member // failed, canceled or stale, by project
	started                                                bool      // a member's build went beyond the outbox
}

// countForStatus counts c's members for its commit status. A root whose
// own pipeline's success started the chain (a member that succeeded with
// that pipeline) is the change, not a rebuild: it is not counted.
func countForStatus(c *Chain) statusCounts {
	roots := map[string]int64{}
	for _, r := range c.Reasons {
		if r.Kind == ReasonPipeline && r.PipelineID != 0 {
			roots[r.Project] = r.PipelineID
		}
	}
	var n statusCounts
	for _, m := range c.Members {
		if id, ok := roots[m.Project]; ok && m.State == Success && m.PipelineID == id {
			continue
		}
		n.total++
		switch {
		case m.State == Success:
			n.rebuilt++
		case m.State == MemberSkipped:
			n.skipped++
		case m.State == Failed || m.State == Canceled || m.State == Stale:
			n.broken = append(n.broken, m)
		case m.State == MemberBlocked:
			n.blocked++
		case m.State.Building() || m.State == Verifying:
			n.building++
		}
		if m.State.Unfinished() || m.State == MemberExpired {
			n.unfinished++ // an expired chain's unfinished members are expired
		}
		if m.State != Waiting && m.State != Pending {
			n.started = true
		}
	}
	return n
}

// commitStateOf is the state of c's commit status: pending until a
// member's build left the outbox, running, then success when the chain
// finished and failed when it is blocked (a later success of the failed
// project resumes it: the status runs again). An expired chain is failed
// if a member failed, else canceled (it stopped, nothing failed). A chain
// in a state this list does not know shows nothing new.
func commitStateOf(c *Chain, n statusCounts) CommitState {
	switch c.State {
	case Running:
		if n.started {
			return CommitRunning
		}
		return CommitPending
	case Finished:
		return CommitSuccess
	case Blocked:
		return CommitFailed
	case Expired:
		if len(n.broken) > 0 {
			return CommitFailed
		}
		return CommitCanceled
	case ChainCanceled:
		return CommitCanceled
	}
	return ""
}

// visibilityRank orders GitLab's visibilities, most visible last; ""
// (not known) is below private.
func visibilityRank(v string) int {
	switch v {
	case "private":
		return 1
	case "internal":
		return 2
	case "public":
		return 3
	}
	return 0
}

// mayName reports whether everyone who can see a commit of a project
// whose visibility is root can also see a project whose visibility is v:
// a public project always, an internal one unless the root is public
// (anyone signed in sees it, and a non-public root's viewers are signed
// in); a private one, or one whose visibility is not known, never (who
// is a member of it is not known here).
func mayName(root, v string) bool {
	return visibilityRank(v) == 3 || (visibilityRank(v) == 2 && visibilityRank(root) < 3 && visibilityRank(root) > 0)
}

// statusDescription says c's progress in one line of at most
// maxStatusDescription bytes: "12 of 14 rebuilt, 1 failed: apps/shop, 1
// blocked". label names a broken member, ok false when the root's viewers
// may not see it (it is then counted, not named).
func statusDescription(c *Chain, n statusCounts, label func(m *Member) (string, bool)) string {
	var b strings.Builder
	switch c.State {
	case Expired:
		b.WriteString("expired: ")
	case ChainCanceled:
		b.WriteString("canceled: ")
	}
	fmt.Fprintf(&b, "%d of %d rebuilt", n.rebuilt, n.total)
	var tail []string
	if n.building > 0 && c.State == Running {
		tail = append(tail, fmt.Sprintf("%d building", n.building))
	}
	if n.blocked > 0 {
		tail = append(tail, fmt.Sprintf("%d blocked", n.blocked))
	}
	if n.skipped > 0 {
		tail = append(tail, fmt.Sprintf("%d skipped", n.skipped))
	}
	if (c.State == Expired || c.State == ChainCanceled) && n.unfinished > 0 {
		tail = append(tail, fmt.Sprintf("%d unfinished", n.unfinished))
	}
	rest := ""
	if len(tail) > 0 {
		rest = ", " + strings.Join(tail, ", ")
	}
	out := b.String()
	return withFailed(out, n.broken, label, rest)
}

// withNames appends ": a, b and N more" to s, N counting the members
// not named (left out for room, or not to be shown); nothing when no name
// is shown.
func withNames(s string, names []string, more int) string {
	if len(names) == 0 {
		return s
	}
	s += ": " + strings.Join(names, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// statusWant is what a transaction last wrote of a root pipeline's
// status, kept in the chain's book so that an unchanged want is not
// written again.
type statusWant struct {
	chainID int64
	state   CommitState
	desc    string
}

// wantStatuses writes, for each pipeline that started c (its
// ReasonPipeline reasons), what the commit status should show now: c's
// state and progress. Only what changed is written; a pipeline with no
// status recorded (a chain started before statuses were on) is left
// alone by the store.
func (t *txn) wantStatuses(c *Chain) error {
	if c.IsValidation() {
		return t.wantValidation(c)
	}
	if t.e.cfg.Statuses == nil || c.State == Merged {
		return nil
	}
	var reasons []Reason
	for _, r := range c.Reasons {
		if r.Kind == ReasonPipeline && r.PipelineID != 0 {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	n := countForStatus(c)
	state := commitStateOf(c, n)
	if state == "" {
		return nil
	}
	b := c.bk()
	if b.statuses == nil {
		b.statuses = map[int64]statusWant{}
	}
	descs := map[string]string{} // by the root's visibility
	for _, r := range reasons {
		root, _, err := t.project(deps.NodeProject(r.Project))
		if err != nil {
			return err
		}
		desc, ok := descs[root.Visibility]
		if !ok {
			desc = statusDescription(c, n, func(m *Member) (string, bool) {
				return t.statusLabel(m.Project, root)
			})
			descs[root.Visibility] = desc
		}
		w := statusWant{chainID: c.ID, state: state, desc: desc}
		if b.statuses[r.PipelineID] == w {
			continue
		}
		if err := t.tx.WantChainStatus(t.ctx, r.PipelineID, c.ID, state, desc); err != nil {
			return fmt.Errorf("chain %d: status of pipeline %d: %w", c.ID, r.PipelineID, err)
		}
		b.statuses[r.PipelineID] = w
		t.statusesWanted = true
	}
	return nil
}

// statusLabel names node in the status of a commit of root, and reports
// whether the root's viewers may see it: a node of the root's own project,
// or of a project mayName allows.
func (t *txn) statusLabel(node string, root Project) (string, bool) {
	p, ok, err := t.project(deps.NodeProject(node))
	if err != nil || !ok {
		return "", false
	}
	label := deps.NodeLabel(node, len(p.Refs) > 0, p.DefaultBranch)
	if p.ID == root.ID || mayName(root.Visibility, p.Visibility) {
		return label, true
	}
	return "", false
}

// addChainStatus records the commit status of the pipeline whose success
// ev reports and which started (or merged into) chain c.
func (t *txn) addChainStatus(c *Chain, ev PipelineEvent, projectID int64) error {
	if t.e.cfg.Statuses == nil || c == nil || ev.SHA == "" || ev.PipelineID == 0 {
		return nil
	}
	s := ChainStatus{PipelineID: ev.PipelineID, ProjectID: projectID, Project: ev.Project, SHA: ev.SHA,
		Ref: ev.Ref, ChainID: c.ID, CreatedAt: t.now, NextSendAt: t.now}
	if err := t.tx.AddChainStatus(t.ctx, s); err != nil {
		return fmt.Errorf("record the commit status of pipeline %d: %w", ev.PipelineID, err)
	}
	return nil
}

// ChainStatuses returns the commit statuses of a chain's root pipelines
// (none for a chain no pipeline started, or when statuses are off).
func (e *Engine) ChainStatuses(ctx context.Context, chainID int64) ([]ChainStatus, error) {
	var out []ChainStatus
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		out, err = tx.ChainStatuses(ctx, chainID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("commit statuses of chain %d: %w", chainID, err)
	}
	return out, nil
}

// withFailed ends a status description: out, the failed members' labels
// as many as fit (then how many more, hidden ones counted), and rest,
// within GitLab's description limit.
func withFailed(out string, failed []*Member, label func(*Member) (string, bool), rest string) string {
	if len(failed) > 0 {
		out += fmt.Sprintf(", %d failed", len(failed))
		var names []string
		hidden := 0
		for _, m := range failed {
			if l, ok := label(m); ok {
				names = append(names, l)
			} else {
				hidden++
			}
		}
		shown := len(names)
		for shown > 0 && len(withNames(out, names[:shown], len(names)-shown+hidden))+len(rest) > maxStatusDescription {
			shown--
		}
		out = withNames(out, names[:shown], len(names)-shown+hidden)
	}
	out += rest
	if len(out) > maxStatusDescription {
		out = out[:maxStatusDescription]
	}
	return out
}
