package chain

import (
	"slices"
	"time"
)

// State is the state of a chain.
type State string

const (
	// Running: some member still waits, is pending or builds.
	Running State = "running"
	// Blocked: every unfinished member is failed, canceled or blocked. A
	// later success of a failed project resumes the chain.
	Blocked State = "blocked"
	// Finished: every member succeeded or was skipped.
	Finished State = "finished"
	// Expired: the chain started more than Config.Expiry ago without
	// finishing; it no longer reacts. Kept for history.
	Expired State = "expired"
	// Merged: the chain was merged into an older one (MergedInto) and has
	// no members of its own any more. Kept so that its id still resolves.
	Merged State = "merged"
	// ChainCanceled: a person canceled the chain (Engine.Cancel): its
	// unsent actions were withdrawn, its running pipelines left running
	// and no longer waited for. It no longer reacts. Kept for history.
	ChainCanceled State = "canceled"
)

// Active reports whether a chain in state s still reacts to events.
func (s State) Active() bool { return s == Running || s == Blocked }

// MemberState is the state of one project in a chain.
type MemberState string

const (
	// Waiting: some in-chain upstream has not succeeded yet.
	Waiting MemberState = "waiting"
	// Pending: the action is in the outbox, the pipeline not created yet.
	Pending MemberState = "pending"
	// Triggered: the pipeline exists (created, pending on GitLab).
	Triggered MemberState = "triggered"
	// Running: the pipeline runs (or waits for a manual job).
	MemberRunning MemberState = "running"
	// Success: the member's build in this chain succeeded.
	Success MemberState = "success"
	// Failed: the pipeline failed or was skipped, or it could not be created.
	Failed MemberState = "failed"
	// Canceled: the pipeline was canceled.
	Canceled MemberState = "canceled"
	// MemberBlocked: an in-chain upstream failed or was canceled.
	MemberBlocked MemberState = "blocked"
	// MemberExpired: the chain expired before the member finished.
	MemberExpired MemberState = "expired"
	// Verifying: the member's pipeline succeeded and the images its project
	// publishes are being read from their registry (images.verify:
	// enforce); its descendants wait for the verdict (verify.go).
	Verifying MemberState = "verifying"
	// Stale: the member's images were still built on an older image of an
	// upstream after a rebuild without cache; its descendants are blocked.
	Stale MemberState = "stale"
	// MemberSkipped: settled and unchanged (docs/design/nodes.md). A
	// person skipped the failed, canceled, stale or blocked member with a
	// reason (Engine.Skip), its pin merge request was closed unmerged or
	// not merged within Config.PinTimeout (pins.go), or every in-chain
	// upstream of a waiting or
	// blocked member ended skipped ("nothing it is built on changed in
	// this chain"). Final: no status moves it; its descendants wait for it
	// no more. Neither Broken nor Unfinished: a chain whose members all
	// succeeded or were skipped is finished.
	MemberSkipped MemberState = "skipped"
)

// Building reports whether a member in state s has an action in flight
// (pending in the outbox, or a pipeline that has not ended).
func (s MemberState) Building() bool {
	return s == Pending || s == Triggered || s == MemberRunning
}

// Unfinished reports whether a member in state s still has work ahead
// without anyone's intervention.
func (s MemberState) Unfinished() bool {
	return s == Waiting || s == WaitingMerge || s == Verifying || s.Building()
}

// Broken reports whether s stops the member's descendants.
func (s MemberState) Broken() bool {
	return s == Failed || s == Canceled || s == Stale || s == MemberBlocked || s == MemberExpired
}

// MemberStates are the states a member can be in, in the order of its
// life: what the API, the CLI and the dashboard show.
func MemberStates() []MemberState {
	return []MemberState{Waiting, WaitingMerge, Pending, Triggered, MemberRunning, Verifying, Success,
		Failed, Canceled, Stale, MemberBlocked, MemberSkipped, MemberExpired}
}

// Mode is how the engine follows the graph.
type Mode string

const (
	// Full rebuilds everything downstream, each project once, in order.
	Full Mode = "full"
	// FirstLevel triggers the direct dependents of every success, as the
	// original gitlab-deps did: no waiting, no blocking, no merging.
	FirstLevel Mode = "first-level"
)

// ReasonKind says why a chain started.
type ReasonKind string

const (
	ReasonPipeline ReasonKind = "pipeline" // a pipeline of the root succeeded
	ReasonRebuild  ReasonKind = "rebuild"  // an operator asked (depsd rebuild)
	ReasonSchedule ReasonKind = "schedule" // a cron schedule fired
	ReasonDigest   ReasonKind = "digest"   // an external base image changed
)

// Reason is why a chain started, or why a later change was merged into it.
type Reason struct {
	Kind       ReasonKind `json:"kind"`
	Project    string     `json:"project"`               // the root this reason is about
	Detail     string     `json:"detail,omitempty"`      // free text: schedule name, image digest, operator
	PipelineID int64      `json:"pipeline_id,omitempty"` // for ReasonPipeline
	At         time.Time  `json:"at"`
}

// Skip is a project a chain did not follow.
type Skip struct {
	Project string `json:"project"`
	Why     string `json:"why"`
}

// Chain is one rebuild: its roots, why it started, and the state of every
// project in it. A project is a member of at most one active full-mode
// chain; first-level chains stand alone.
type Chain struct {
	ID   int64
	Mode Mode
	// Kind is KindValidation for a validation; "" (or KindRelease) for
	// a release chain. Validation says what a validation validates (nil
	// for a release chain).
	Kind       ChainKind
	Validation *Validation
	State      State
	Roots      []string // sorted
	Reasons    []Reason // in the order they came
	Skipped    []Skip   // projects left out: on a cycle or only reachable through one
	MergedInto int64    // for State Merged
	StartedAt  time.Time
	UpdatedAt  time.Time
	EndedAt    time.Time // when it finished, expired or was merged
	Members    []*Member // sorted by project

	dirty bool  // changed since loaded or saved: must be saved
	book  *book // what the engine derived and tracks (track.go)
}

// Member is one project of a chain.
type Member struct {
	Project   string
	ProjectID int64 // 0 when unknown (not in the store)
	State     MemberState
	// Upstreams are the member's direct upstreams that are members of the
	// chain, sorted: what it waits for.
	Upstreams []string
	// Pinned are those of Upstreams it pins by digest (deps.Graph.Pinned):
	// their change reaches it through a merge request (pins.go).
	Pinned []string
	// Why says, in words, why the member waits, is blocked or failed.
	Why string
	// Requeued: one more build is queued behind the current one
	// (Pending/Triggered/Running), because an upstream changed again.
	Requeued bool
	// Builds counts the actions created for the member in this chain,
	// less those withdrawn before they were sent: 1 normally, 2 after a
	// requeue or a reset by a merge.
	Builds int
	// NoCache: the current build was asked without cache, because the
	// previous one's images were stale; a stale verdict on it makes the
	// member Stale instead of rebuilding it again.
	NoCache bool
	// Verified is the verdict on the images of the member's last build
	// (ImageFresh, ImageStale, ImageUnknown; "" when none was reached),
	// and VerifyDetail says it in a sentence.
	Verified     ImageState
	VerifyDetail string
	// Images are the digests the verification of its last build read, by
	// image (host/path:tag): what a downstream's pins move to.
	Images map[string]string
	// MergeRequest is the URL of the merge request moving its pins, and
	// MergeRequestIID its iid, while WaitingMerge (and after, for the
	// record); MergeSHA the merge's commit on the target branch once
	// depsd saw it merged: the pipeline of that commit is its build.
	MergeRequest    string
	MergeRequestIID int64
	MergeSHA        string
	ActionID        string // the current action; "" when none
	PipelineID      int64  // the current (or last) pipeline; 0 when none
	PipelineURL     string
	TriggeredAt     time.Time
	FinishedAt      time.Time
}

// IsValidation reports whether c is a validation (premerge.go).
func (c *Chain) IsValidation() bool { return c.Kind == KindValidation }

// member returns the member for project p, or nil.
func (c *Chain) member(p string) *Member {
	i, ok := slices.BinarySearchFunc(c.Members, p, func(m *Member, p string) int {
		switch {
		case m.Project < p:
			return -1
		case m.Project > p:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return c.Members[i]
}

// Member returns the member for project p, or nil.
func (c *Chain) Member(p string) *Member { return c.member(p) }

// add inserts m, keeping Members sorted. m.Project must not be a member.
func (c *Chain) add(m *Member) {
	i, _ := slices.BinarySearchFunc(c.Members, m.Project, func(x *Member, p string) int {
		switch {
		case x.Project < p:
			return -1
		case x.Project > p:
			return 1
		}
		return 0
	})
	c.Members = slices.Insert(c.Members, i, m)
	c.reshaped()
}

// touch marks the chain changed at now.
func (c *Chain) touch(now time.Time) {
	c.dirty = true
	c.UpdatedAt = now
}

// Dirty reports whether the chain changed since it was loaded or last
// saved. Store implementations may use it to skip unchanged chains.
func (c *Chain) Dirty() bool { return c.dirty }

// addRoot records root r (sorted, deduplicated).
func (c *Chain) addRoot(r string) {
	if i, found := slices.BinarySearch(c.Roots, r); !found {
		c.Roots = slices.Insert(c.Roots, i, r)
	}
}
