// Package chain is depsd's rebuild engine: it turns "project P's pipeline
// succeeded/failed" and "rebuild P" into pipeline-creation actions, exactly
// once per project per chain, in dependency order. See "Chain semantics"
// in ARCHITECTURE.md.
//
// What it holds: the rebuild engine: chains, inbox,
// outbox, sender, reconciler, catch-up, each chain's commit status on the
// commit that started it (`chain/commitstatus.go`, `chain/statussend.go`),
// and the merge requests moving digest pins (`chain/pins.go`,
// `sendpins.go`, `pinwatch.go`); validations before the merge
// (`chain/premerge.go` the types and rules, `validation.go` a merge
// request pipeline taken as a candidate and its validation chain started,
// `validationrun.go` the leader's `RunValidations`: candidates' digests,
// merge requests followed, validation images read, pipelines canceled,
// tags deleted, `validationnote.go` the commit status `depsd/dependents`
// and the one merge request note, `validationview.go` the views)
package chain

import "time"

// PipelineEvent is a pipeline status change of a project's default branch,
// from a webhook or from the reconciler.
type PipelineEvent struct {
	ProjectID  int64
	Project    string // path_with_namespace
	PipelineID int64
	Status     string // GitLab's: created, pending, running, success, failed, canceled, skipped, manual, ...
	Ref        string
	Tag        bool // Ref is a tag: never counts (only the default branch does)
	SHA        string
	Source     string            // push, web, api, trigger, schedule, pipeline, ...
	Variables  map[string]string // pipeline variables; depsd's own carry DEPSD_ACTION_ID
	URL        string
	At         time.Time // when GitLab reported it (finished_at, else the delivery time)
	// MergeRequest is the merge request of a merge request pipeline
	// (Source SourceMergeRequest), from its Pipeline Hook: its image is a
	// candidate (premerge.go), never a release.
	MergeRequest *MergeRequestRef `json:",omitempty"`
}

// PushEvent says a project's default branch moved and which files changed.
type PushEvent struct {
	ProjectID int64
	Project   string
	Ref       string
	After     string   // new head commit
	Changed   []string // paths added, modified or removed
	At        time.Time
}

// SourceChildPipeline is the source GitLab gives a child pipeline: its
// status events are not the project's.
const SourceChildPipeline = "parent_pipeline"

// Pipeline variables depsd sets on the pipelines it creates.
const (
	VarChainID  = "DEPSD_CHAIN_ID"
	VarUpstream = "DEPSD_UPSTREAM"
	VarActionID = "DEPSD_ACTION_ID"
	// VarNoCache is "1" on a rebuild asked without cache, because the
	// previous build published a stale image (docs/verification.md shows
	// the job snippet that honours it).
	VarNoCache = "DEPSD_NO_CACHE"
)

// Event is one entry of the event inbox: exactly one of Pipeline and Push is
// set. It is what the webhook handler records (Store.RecordEvents, through the Recorder) before it
// answers, and what ProcessInbox applies.
type Event struct {
	Pipeline *PipelineEvent `json:"pipeline,omitempty"`
	Push     *PushEvent     `json:"push,omitempty"`
}

// Kind names the event for logs and metrics: "pipeline", "push" or "empty".
func (e Event) Kind() string {
	switch {
	case e.Pipeline != nil:
		return "pipeline"
	case e.Push != nil:
		return "push"
	}
	return "empty"
}

// NewEvent is an event to record with its delivery's Idempotency-Key
// (Store.RecordEvents).
type NewEvent struct {
	Key   string
	Event Event
}
