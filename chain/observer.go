package chain

import "time"

// Observer is told what the engine did, after the store transaction that did
// it committed, so the daemon can export metrics without the engine knowing
// about Prometheus. Methods are called synchronously from the engine's
// goroutines, possibly concurrently, and must return quickly.
type Observer interface {
	// EventApplied: an inbox event (kind "pipeline" or "push") or a
	// reconciled status was applied; outcome is the short result recorded
	// with it (e.g. "advanced", "started chain", "ignored: not default branch").
	EventApplied(kind, outcome string)
	// PipelineCreated: an action was sent (adopted is true when an existing
	// pipeline carrying its id was found instead).
	PipelineCreated(project string, adopted bool)
	// ActionError: creating a pipeline failed; permanent errors fail the member.
	ActionError(project string, permanent bool)
	// ChainEnded: a chain finished or expired (state) after running d.
	ChainEnded(state State, d time.Duration)
	// CommitStatus: a chain's commit status was sent toward state
	// (pending, running, success, failed, canceled) with an outcome:
	// StatusPosted, StatusUnchanged, StatusRetry, StatusRefused or
	// StatusGaveUp.
	CommitStatus(state, outcome string)
}

type nopObserver struct{}

func (nopObserver) EventApplied(string, string)     {}
func (nopObserver) PipelineCreated(string, bool)    {}
func (nopObserver) ActionError(string, bool)        {}
func (nopObserver) ChainEnded(State, time.Duration) {}
func (nopObserver) CommitStatus(string, string)     {}
