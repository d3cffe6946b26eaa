package chain

import (
	"context"
	"errors"
	"fmt"

	"gitlab.com/depsd/depsd/gitlab"
)

// SetSendHook makes the outbox worker call f after it claimed an action and
// before it asks GitLab, so tests can interleave a crash or a webhook there.
func SetSendHook(e *Engine, f func(Action)) { e.sendHook = f }

// SetInboxWaitHook makes the reconciler call f each time it waits for the
// inbox to apply the events recorded before its round.
func SetInboxWaitHook(e *Engine, f func()) { e.inboxWaitHook = f }

// SetFullPathOnly makes e's inbox apply every event on the full path
// (cheap.go's shortcut off), the reference the cheap path is compared with.
func SetFullPathOnly(e *Engine) { e.fullPathOnly = true }

// InboxWoken reports whether a wake-up of e's inbox (NotifyInbox) waits
// for RunInbox.
func InboxWoken(e *Engine) bool { return len(e.inboxC) > 0 }

// ReleaseAbandoned gives back the claims of e's stopped sends, as
// RunOutbox does at the start of each round.
func ReleaseAbandoned(ctx context.Context, e *Engine) error { return e.releaseAbandoned(ctx) }

// RecordEvent records one webhook event in the inbox and wakes the
// processor: the tests' shorthand for what the daemon's Recorder does in
// batches. A duplicate key is reported and not recorded again.
func (e *Engine) RecordEvent(ctx context.Context, key string, ev Event) (duplicate bool, err error) {
	if ev.Pipeline == nil && ev.Push == nil {
		return false, errors.New("record event: empty event")
	}
	dups, err := e.cfg.Store.RecordEvents(ctx, []NewEvent{{Key: key, Event: ev}})
	if err != nil {
		return false, fmt.Errorf("record %s event: %w", ev.Kind(), err)
	}
	if !dups[0] {
		e.NotifyInbox()
	}
	return dups[0], nil
}

// OutboxRunning reports whether e's RunOutbox has registered its senders
// (actions queued from then on are handed to them).
func OutboxRunning(e *Engine) bool { return e.outbox.Load() != nil }

// SentQueued is how many senders' outcomes wait to be recorded.
func SentQueued(e *Engine) int {
	e.sent.mu.Lock()
	defer e.sent.mu.Unlock()
	return len(e.sent.queue)
}

// CreateOptionsOf is what the outbox sends for a (by its project's ident).
func CreateOptionsOf(a Action) gitlab.CreateOptions { return a.createOptions(a.ChainID, false) }

// CreatePipelineOf creates a's pipeline as the outbox's sender does (its
// project's ident, the refusals it learns from), without an outbox.
func (e *Engine) CreatePipelineOf(ctx context.Context, a Action) (gitlab.Pipeline, error) {
	return e.create(ctx, e.log, &a, a.ChainID)
}

// SetStatusHooks makes the commit status sender call claimed after it
// claimed a status (before GitLab is read or posted to) and posted after
// GitLab accepted a post (before its outcome is recorded).
func SetStatusHooks(e *Engine, claimed, posted func(ChainStatus)) {
	e.statusHooks = statusHooks{claimed: claimed, posted: posted}
}

// CommitStep is commitStep: what to post to move a status from have to want.
func CommitStep(have CommitState, haveDesc string, want CommitState, wantDesc string) (CommitState, bool) {
	return commitStep(have, haveDesc, want, wantDesc)
}

// MayName is mayName.
func MayName(root, v string) bool { return mayName(root, v) }

// StatusOf is what c's commit status says: its state and its description,
// naming a broken member by labels (absent: not to be shown).
func StatusOf(c *Chain, labels map[string]string) (CommitState, string) {
	n := countForStatus(c)
	return commitStateOf(c, n), statusDescription(c, n, func(m *Member) (string, bool) {
		l, ok := labels[m.Project]
		return l, ok
	})
}
