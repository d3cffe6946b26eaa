package chain

// SetSendHook makes the outbox worker call f after it claimed an action and
// before it asks GitLab, so tests can interleave a crash or a webhook there.
func SetSendHook(e *Engine, f func(Action)) { e.sendHook = f }
