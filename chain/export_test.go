package chain

import "context"

// SetSendHook makes the outbox worker call f after it claimed an action and
// before it asks GitLab, so tests can interleave a crash or a webhook there.
func SetSendHook(e *Engine, f func(Action)) { e.sendHook = f }

// SetInboxWaitHook makes the reconciler call f each time it waits for the
// inbox to apply the events recorded before its round.
func SetInboxWaitHook(e *Engine, f func()) { e.inboxWaitHook = f }

// ReleaseAbandoned gives back the claims of e's stopped sends, as
// RunOutbox does at the start of each round.
func ReleaseAbandoned(ctx context.Context, e *Engine) error { return e.releaseAbandoned(ctx) }
