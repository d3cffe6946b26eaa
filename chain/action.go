package chain

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// ActionState is where an action is in the outbox.
type ActionState string

const (
	// ActionPending: to be sent (again) once due and not leased.
	ActionPending ActionState = "pending"
	// ActionSent: the pipeline exists (created or adopted).
	ActionSent ActionState = "sent"
	// ActionFailed: GitLab refused it for good; the member failed.
	ActionFailed ActionState = "failed"
	// ActionObsolete: the member no longer needs it (the chain expired,
	// or a merge reset the member) before it was sent.
	ActionObsolete ActionState = "obsolete"
)

// Action is one pipeline to create (or, of kind ActionPins, one merge
// request moving pins to open or update): the outbox entry written in the
// same transaction as the member that needs it.
type Action struct {
	ID string // DEPSD_ACTION_ID: unique, random
	// Kind is ActionPipeline (a pipeline to create) or ActionPins (the
	// merge request moving the member's pins, Pins).
	Kind ActionKind
	Pins *PinsRequest
	// Validate is what an action of kind ActionValidate builds on and
	// pushes (premerge.go).
	Validate  *ValidateRequest
	ChainID   int64 // the chain when the action was written; merges may move the member
	Project   string
	ProjectID int64
	Ref       string   // the default branch when written; refreshed when sent
	Upstreams []string // in-chain upstreams that caused it (DEPSD_UPSTREAM)
	// NoCache: build without cache (DEPSD_NO_CACHE=1): the member's
	// previous build published a stale image (verify.go).
	NoCache bool
	State   ActionState
	// Attempts counts the claims. An action claimed before may have been
	// sent (the worker crashed or GitLab answered 5xx): it is looked for on
	// GitLab before it is created again.
	Attempts      int
	NextAttemptAt time.Time
	LeaseUntil    time.Time // a worker holds it until then; zero when free
	// ClaimedBy is the Config.Owner of the engine that holds the lease
	// ("" for an engine without one). When that owner's liveness lease
	// (Tx.DueAction) has run out, the claim is void before LeaseUntil: a
	// replica that died mid-send does not hold its actions for minutes.
	ClaimedBy   string
	LastError   string
	PipelineID  int64
	PipelineURL string
	CreatedAt   time.Time
	SentAt      time.Time
	// ClaimedAt is when it was first claimed: no pipeline of its can be
	// older (a resend adopts only pipelines created since).
	ClaimedAt time.Time

	// Ident is the project's PipelineIdent when claimed (not stored).
	Ident PipelineIdent
}

// createOptions are what its pipeline carries, by the project's ident.
//
// A build without cache goes with the depsd_no_cache input too, unless the
// project refused it (noCacheInputRefused: it declares depsd_action_id
// only; the build then has nothing to tell it to skip its cache).
func (a Action) createOptions(chainID int64, noCacheInputRefused bool) gitlab.CreateOptions {
	switch a.Ident {
	case IdentInputs:
		inputs := map[string]string{InputActionID: a.ID}
		if a.NoCache && !noCacheInputRefused {
			inputs[InputNoCache] = "true"
		}
		if v := a.Validate; v != nil {
			inputs[InputValidate], inputs[InputBuildContexts] = "true", v.BuildContexts
			if v.Tag != "" {
				inputs[InputValidateTag] = v.Tag
			}
		}
		return gitlab.CreateOptions{Inputs: inputs}
	case IdentNone:
		return gitlab.CreateOptions{}
	}
	return gitlab.CreateOptions{Variables: a.Variables(chainID)}
}

// Variables are the pipeline variables of the action's pipeline.
func (a Action) Variables(chainID int64) map[string]string {
	vars := map[string]string{
		VarChainID:  formatID(chainID),
		VarUpstream: strings.Join(a.Upstreams, ","),
		VarActionID: a.ID,
	}
	if a.NoCache {
		vars[VarNoCache] = "1"
	}
	if v := a.Validate; v != nil {
		vars[VarValidate], vars[VarBuildContexts] = "1", v.BuildContexts
		if v.Tag != "" {
			vars[VarValidateTag] = v.Tag
		}
	}
	return vars
}

// newActionID returns a random id: unique across stores and restarts, so a
// pipeline carrying it can only be this action's.
func newActionID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return "a-" + hex.EncodeToString(b[:])
}
