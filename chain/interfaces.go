package chain

import (
	"context"
	"errors"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// GitLab is the part of the GitLab API the engine uses; *gitlab.Client
// implements it. Errors are classified with gitlab.IsRetryable and
// gitlab.IsPermanent. Calls may be concurrent. CreatePipeline must not retry
// by itself after a 5xx or a broken connection (the pipeline may exist): the
// outbox worker looks for the pipeline before it creates it again. A
// project that refuses the options' variables or inputs answers
// gitlab.ErrVariablesRefused or gitlab.ErrInputsRefused (see PipelineIdent).
// CurrentUser is the token's user, whose pipelines a resend may adopt; it
// may be cached.
type GitLab interface {
	CreatePipeline(ctx context.Context, projectID int64, ref string, o gitlab.CreateOptions) (gitlab.Pipeline, error)
	CurrentUser(ctx context.Context) (gitlab.User, error)
	GetPipeline(ctx context.Context, projectID, pipelineID int64) (gitlab.Pipeline, error)
	ListPipelines(ctx context.Context, projectID int64, f gitlab.PipelineFilter) ([]gitlab.Pipeline, error)
	PipelineVariables(ctx context.Context, projectID, pipelineID int64) (map[string]string, error)
}

// Repository is what moving pins writes and reads on GitLab (pins.go);
// *gitlab.Client implements it, with its errors (gitlab.ErrConflict for a
// file changed since it was read or an open merge request of the same
// branch, gitlab.ErrForbidden for a branch the token may not push to,
// gitlab.ErrNotMergeable). Calls may be concurrent. Creations are not
// retried after a 5xx: a resend looks for what it may have made.
type Repository interface {
	ReadFile(ctx context.Context, projectID int64, path, ref string) (gitlab.File, error)
	GetBranch(ctx context.Context, projectID int64, name string) (gitlab.Branch, error)
	CreateCommit(ctx context.Context, projectID int64, r gitlab.CommitRequest) (gitlab.Commit, error)
	ListMergeRequests(ctx context.Context, projectID int64, f gitlab.MergeRequestFilter) ([]gitlab.MergeRequest, error)
	GetMergeRequest(ctx context.Context, projectID, iid int64) (gitlab.MergeRequest, error)
	CreateMergeRequest(ctx context.Context, projectID int64, n gitlab.NewMergeRequest) (gitlab.MergeRequest, error)
	UpdateMergeRequest(ctx context.Context, projectID, iid int64, u gitlab.MergeRequestUpdate) (gitlab.MergeRequest, error)
	CloseMergeRequest(ctx context.Context, projectID, iid int64) (gitlab.MergeRequest, error)
	MergeMergeRequest(ctx context.Context, projectID, iid int64, mo gitlab.MergeOptions) (gitlab.MergeRequest, error)
	CreateMergeRequestNote(ctx context.Context, projectID, iid int64, body string) (gitlab.Note, error)
}

// GraphSource returns the current dependency graph. It is called once per
// batch of work, outside any store transaction; it may return a cached graph
// that the daemon swaps after a rescan. The graph is only read.
type GraphSource func(ctx context.Context) (*deps.Graph, error)

// Rescan rescans projects after pushes to them (to the default branch or
// a branch they follow), or after a new release of one. It is called by
// the inbox processor, outside any store transaction. What it reads of
// each project must include every change GitLab held when it was called
// (the daemon reads them again, the rest of the scope kept as stored):
// the inbox marks the pushes to them recorded before the call as covered
// by it.
type Rescan func(ctx context.Context, projects []string) error

// ErrNotFound is returned by Tx.Chain and Engine.Chain for an unknown chain
// id, and by Tx.UpdateAction for an unknown action id.
var ErrNotFound = errors.New("not found")

// Store keeps the chains, the outbox of actions and the event inbox; the
// store package's *Store implements it on SQLite and on PostgreSQL. Any number of engines, in
// one process or several (the daemon and `depsd rebuild`), may share one
// store: UpdateChains transactions are serialised by the store, so each sees the
// effects of the previous ones.
type Store interface {
	// UpdateChains runs fn in one write transaction, committed if fn
	// returns nil and rolled back otherwise. The write lock is held from the
	// start (other writers wait), so fn must be quick and must never call
	// GitLab. When ctx comes from RecordingFirst, fn's first write is
	// Tx.RecordEvents of those events: the store may send it with the
	// statements that begin the transaction; and where recording needs no
	// write lock (PostgreSQL) and another process holds it, or a writer of
	// this process is ahead, the store may instead commit the recording
	// alone, not call fn, and return a *RecordedOnlyError: the events are
	// recorded, nothing is applied.
	UpdateChains(ctx context.Context, fn func(Tx) error) error
	// ViewChains runs fn in a read-only snapshot; fn must not write.
	ViewChains(ctx context.Context, fn func(Tx) error) error
	// RecordEvents adds events to the inbox in one transaction, in order,
	// except those whose key was recorded in the last week or earlier in
	// the same call (their duplicate flag is then true and nothing is
	// written). An empty key is never a duplicate. On error nothing is
	// recorded.
	RecordEvents(ctx context.Context, evs []NewEvent) (duplicate []bool, err error)
}

// PipelineSeen is what a Tx holds of one pipeline (Tx.PipelineSeen).
type PipelineSeen struct {
	Action    Action
	HasAction bool // Action is the action that created the pipeline
	// Counted: a chain member recorded its success with the pipeline (it
	// is Success, Verifying or Stale with it).
	Counted bool
	Started bool // a chain has a ReasonPipeline with the pipeline's id
}

// recordingFirstKey is the context key of RecordingFirst.
type recordingFirstKey struct{}

// RecordingFirst announces to Store.UpdateChains that its fn records evs
// first (the Recorder's applyNow): on PostgreSQL the recording then goes
// to the server with the BEGIN, one round trip fewer on the path from a
// webhook to its pipelines. fn must then call Tx.RecordEvents with the
// same slice first: the store may have written them with the BEGIN.
func RecordingFirst(ctx context.Context, evs []NewEvent) context.Context {
	return context.WithValue(ctx, recordingFirstKey{}, evs)
}

// RecordedOnlyError is what UpdateChains returns when it recorded the
// events RecordingFirst announced without applying them: the write lock
// was held by another process, or another writer of this process was
// ahead, and recording does not wait for them. The events are committed
// (Duplicate says which were recorded before); the inbox applies them.
type RecordedOnlyError struct{ Duplicate []bool }

func (e *RecordedOnlyError) Error() string {
	return "recorded only: another writer holds the write lock or is ahead of this one"
}

// EventsRecordedFirst returns the events RecordingFirst announced in ctx.
func EventsRecordedFirst(ctx context.Context) []NewEvent {
	evs, _ := ctx.Value(recordingFirstKey{}).([]NewEvent)
	return evs
}

// Tx is one store transaction, valid only inside the UpdateChains or ViewChains
// callback that received it. Methods return errors with context; a missing
// record is a false ok, not an error, except where noted.
type Tx interface {
	// ActiveChains returns the running and blocked chains with their members.
	// Inside UpdateChains a store may hand out the same *Chain values from
	// one transaction to the next (a cache it validates against the
	// stored chains): the transaction owns them until it ends, saves every
	// chain it changes, and a store must not keep what a rolled-back
	// transaction changed.
	ActiveChains(ctx context.Context) ([]*Chain, error)
	// Chain returns one chain with its members, or ErrNotFound.
	Chain(ctx context.Context, id int64) (*Chain, error)
	// Chains returns chains matching f, newest first.
	Chains(ctx context.Context, f Filter) ([]*Chain, error)
	// NewChainID returns an id no chain has.
	NewChainID(ctx context.Context) (int64, error)
	// SaveChain inserts or replaces the chain and its reasons, and writes
	// the members c.SaveSet names (all of them when it says so): the
	// others are stored as they are.
	SaveChain(ctx context.Context, c *Chain) error
	// ChainWithReason returns the chain holding a reason equal to r
	// (kind, project, detail and time), so that a scheduled or image-change
	// rebuild asked for again starts nothing twice.
	ChainWithReason(ctx context.Context, r Reason) (id int64, ok bool, err error)
	// PipelineSeen tells, in one look-up, what is stored of the pipeline
	// an event reports, so that an event seen twice counts once: the
	// first action that created it, whether a member recorded its success
	// with it, and whether a chain has a ReasonPipeline with its id.
	PipelineSeen(ctx context.Context, pipelineID int64) (PipelineSeen, error)

	// AddAction writes a new action to the outbox.
	AddAction(ctx context.Context, a Action) error
	// Action returns the action with this id.
	Action(ctx context.Context, id string) (Action, bool, error)
	// UpdateAction replaces the stored action with the same id.
	UpdateAction(ctx context.Context, a Action) error
	// DueAction returns the pending action due first (NextAttemptAt <= now)
	// whose lease, if any, has run out, or whose ClaimedBy owner is no
	// longer alive (its "alive:<owner>" lease, see store.TryLease, expired
	// or is missing).
	DueAction(ctx context.Context, now time.Time) (Action, bool, error)
	// NextDue returns when the earliest pending action falls due (its next
	// attempt or the end of its lease, whichever is later).
	NextDue(ctx context.Context) (time.Time, bool, error)
	// CountActions counts the actions in a state.
	CountActions(ctx context.Context, state ActionState) (int, error)

	// RecordEvents is Store.RecordEvents inside this write transaction:
	// the events are recorded with its commit, so that they can be
	// applied before it (the Recorder's path when webhooks are few).
	RecordEvents(ctx context.Context, evs []NewEvent) (duplicate []bool, err error)
	// NextEvent returns the oldest unprocessed event.
	NextEvent(ctx context.Context) (StoredEvent, bool, error)
	// MarkEvent records that the event was processed, with a short result.
	MarkEvent(ctx context.Context, seq int64, at time.Time, result string) error
	// UnprocessedPushes returns the unprocessed push events, oldest
	// first, up to limit.
	UnprocessedPushes(ctx context.Context, limit int) ([]StoredEvent, error)
	// PruneEvents deletes processed events received before before.
	PruneEvents(ctx context.Context, before time.Time) (int, error)
	// CountEvents counts the unprocessed events.
	CountEvents(ctx context.Context) (int, error)

	// Project returns a stored project's GitLab id, default branch and
	// how its pipelines are identified.
	Project(ctx context.Context, path string) (Project, bool, error)
	// SetPipelineIdent stores how the project's pipelines are identified,
	// learned from GitLab's answer to a create; every process's later
	// transactions see it (Project).
	SetPipelineIdent(ctx context.Context, projectID int64, ident PipelineIdent) error

	// CatchUpCursor returns how far the catch-up has read a project's
	// pipelines (the newest updated_at seen); ok is false for a project it
	// never read.
	CatchUpCursor(ctx context.Context, projectID int64) (at time.Time, ok bool, err error)
	// SetCatchUpCursor stores it.
	SetCatchUpCursor(ctx context.Context, projectID int64, at time.Time) error

	// QueueVerify adds a verification to do; one already queued for the
	// same project and pipeline is kept as it is.
	QueueVerify(ctx context.Context, task VerifyTask) error
	// VerifyTasks returns up to limit queued verifications, oldest first.
	VerifyTasks(ctx context.Context, limit int) ([]VerifyTask, error)
	// CountVerifyTasks counts the queued verifications.
	CountVerifyTasks(ctx context.Context) (int, error)
	// DoneVerify removes the verification of project's pipeline from the
	// queue; none queued is not an error.
	DoneVerify(ctx context.Context, project string, pipelineID int64) error

	// AddWrite records something depsd wrote to GitLab for a chain
	// (moving pins); Writes returns a chain's, oldest first.
	AddWrite(ctx context.Context, w Write) error
	Writes(ctx context.Context, chainID int64) ([]Write, error)
	// AddAudit appends an entry to the audit log (its ID is the store's).
	AddAudit(ctx context.Context, e AuditEntry) error
	// Audit returns the entries f selects, newest first (f.Limit > 0).
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// AddChainStatus records the commit status to keep on the commit of
	// a pipeline that started a chain (commitstatus.go), in the
	// transaction that starts the chain; one already recorded for the
	// pipeline is kept as it is.
	AddChainStatus(ctx context.Context, s ChainStatus) error
	// WantChainStatus sets what the status of the root pipeline
	// pipelineID should show: the chain holding it, the state and the
	// description. When any of them changed, the status's WantSeq grows
	// (its sender is due). A pipeline with no status recorded is left
	// alone: nothing is written.
	WantChainStatus(ctx context.Context, pipelineID, chainID int64, want CommitState, desc string) error
	// ChainStatus returns the status of a root pipeline.
	ChainStatus(ctx context.Context, pipelineID int64) (ChainStatus, bool, error)
	// ChainStatuses returns the statuses of a chain's root pipelines, by
	// pipeline id.
	ChainStatuses(ctx context.Context, chainID int64) ([]ChainStatus, error)
	// DueChainStatus returns the status due first at now (ChainStatus.Due,
	// earliest NextSendAt first) whose claim, if any, ran out: its lease
	// ended, or its ClaimedBy owner is no longer alive (as DueAction).
	DueChainStatus(ctx context.Context, now time.Time) (ChainStatus, bool, error)
	// NextChainStatusDue returns when the earliest status with a want not
	// yet dealt with falls due (its NextSendAt or the end of its lease,
	// whichever is later).
	NextChainStatusDue(ctx context.Context) (time.Time, bool, error)
	// SaveChainStatusSend writes the sender's part of s (DoneSeq, Have,
	// HaveDesc, Doubt, NextSendAt, LeaseUntil, ClaimedBy, Attempts,
	// LastError, SentAt), never what the chain wants (Want, WantDesc,
	// WantSeq, ChainID), which a chain transaction may have changed since
	// the sender read it.
	SaveChainStatusSend(ctx context.Context, s ChainStatus) error

	// OwnerAlive reports whether owner (a Config.Owner) is alive at now:
	// its "alive:<owner>" lease has not run out (as DueAction).
	OwnerAlive(ctx context.Context, owner string, now time.Time) (bool, error)

	// MRValidation returns what is kept of a merge request of an
	// upstream (premerge.go).
	MRValidation(ctx context.Context, projectID, iid int64) (MRValidation, bool, error)
	// SaveMRValidation inserts or replaces it.
	SaveMRValidation(ctx context.Context, v MRValidation) error
	// MRValidations returns those f selects, the most recently changed
	// first.
	MRValidations(ctx context.Context, f MRFilter) ([]MRValidation, error)
	// NextMRValidationDue returns when the earliest work of
	// RunValidations on a merge request falls due (a start, a check, a
	// note whose lease or retry ends, a cleanup).
	NextMRValidationDue(ctx context.Context) (time.Time, bool, error)
	// QueueBranchCandidate records the success of a pipeline of a branch
	// no node follows, in a project premerge covers: the branch may be a
	// merge request's source (RunValidations looks). One queued for the
	// same pipeline is kept as it is.
	QueueBranchCandidate(ctx context.Context, c BranchCandidate) error
	// BranchCandidates returns up to limit queued, oldest first;
	// DoneBranchCandidate removes one.
	BranchCandidates(ctx context.Context, limit int) ([]BranchCandidate, error)
	DoneBranchCandidate(ctx context.Context, pipelineID int64) error
	// UpstreamRefs returns node's dependencies on the node upstream, as
	// its files write them (Ref, Kind): what a validation build of node
	// replaces by the upstream's candidate.
	UpstreamRefs(ctx context.Context, node, upstream string) ([]deps.Dependency, error)
}

// BranchCandidate is a successful pipeline of a branch that may be a
// merge request's source (Tx.QueueBranchCandidate).
type BranchCandidate struct {
	ProjectID   int64
	Project     string // path
	Branch      string
	SHA         string
	PipelineID  int64
	PipelineURL string
	QueuedAt    time.Time
}

// Project is what the engine needs to know of a stored project.
type Project struct {
	ID            int64
	Path          string
	DefaultBranch string
	// Ident is how its pipelines carry their action's id: learned from
	// GitLab's refusals and from the project's settings and CI
	// configuration by scans ("" until then: variables).
	Ident PipelineIdent
	// Visibility is GitLab's (public, internal, private; "" when no scan
	// recorded it): what the chain's commit status may name
	// (commitstatus.go).
	Visibility string
	// Refs are the refs of its nodes besides the default branch, by node
	// key (docs/design/nodes.md): a followed branch, or, for its release
	// tags, the newest release tag. Nil: it follows its default branch
	// alone.
	Refs map[string]string
	// Files are the dependency file (the Containerfile) each of its nodes
	// was analysed from, by node key; none for a node without one.
	Files map[string]string
	// RegistryPrefix is where its images live (host/path: GitLab's
	// container_registry_image_prefix); "" without a registry.
	RegistryPrefix string
}

// PipelineIdent is how the pipelines depsd creates in a project name their
// action, so that a resend finds the pipeline an earlier attempt created.
type PipelineIdent string

const (
	// IdentVariables: the DEPSD_* pipeline variables (the default).
	IdentVariables PipelineIdent = "variables"
	// IdentInputs: the project refuses variables and its CI configuration
	// declares the depsd_action_id input (spec: inputs:, GitLab 17.10+).
	IdentInputs PipelineIdent = "inputs"
	// IdentNone: the project refuses variables and declares no such
	// input: the pipeline is known by the create's answer, and a resend
	// adopts the token's user's api pipeline created after the claim.
	IdentNone PipelineIdent = "none"
)

// InputActionID is the pipeline input that carries the action's id.
const InputActionID = "depsd_action_id"

// InputNoCache is the pipeline input that asks a project declaring it for
// a build without cache (Action.NoCache), where variables are refused.
const InputNoCache = "depsd_no_cache"

// StoredEvent is an inbox entry.
type StoredEvent struct {
	Seq        int64
	Key        string
	Event      Event
	ReceivedAt time.Time
}

// Filter selects chains for Chains. The zero value selects the newest 100.
type Filter struct {
	// Kind keeps chains of this kind; empty: release chains (the views
	// of rebuilds show no validation).
	Kind    ChainKind
	State   State  // only chains in this state; empty: any
	Project string // only chains with this member; empty: any
	Limit   int    // at most this many; 0 means 100
}
