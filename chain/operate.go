package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// What a person may do to a chain from the dashboard or the HTTP API
// (who may is the caller's business: the daemon checks the person's role
// on GitLab first). Each action is one engine transaction, like every
// other change to chains, and writes its audit entry in that same
// transaction: an action that happened is in the audit log, and one that
// did not is not.

// Actor is who asks for an action and from where.
type Actor struct {
	Name    string // GitLab username
	ID      int64  // GitLab user id
	Address string // the client's address, as the daemon saw it
}

// AuditAction names an action in the audit log.
type AuditAction string

// The actions a person may take.
const (
	AuditRebuild AuditAction = "rebuild"
	AuditRetry   AuditAction = "retry"
	AuditSkip    AuditAction = "skip"
	AuditCancel  AuditAction = "cancel"
)

// OutcomeDone is the outcome of an action that was carried out; a
// refused one says why it was refused.
const OutcomeDone = "done"

// AuditEntry is one line of the audit log: who did (or was refused) what,
// on which chain and member, why, when and from where.
type AuditEntry struct {
	ID      int64       `json:"id"`
	At      time.Time   `json:"at"`
	Actor   string      `json:"actor"`
	ActorID int64       `json:"actor_id"`
	Address string      `json:"address,omitempty"`
	Action  AuditAction `json:"action"`
	ChainID int64       `json:"chain_id,omitempty"`
	// Target is the member (or, for a rebuild, the project) acted on; ""
	// for an action on a whole chain.
	Target  string `json:"target,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Outcome string `json:"outcome"`
}

// AuditFilter selects audit entries, newest first. The zero value
// selects the newest 100.
type AuditFilter struct {
	ChainID int64 // only entries about this chain; 0: any
	Limit   int   // at most this many; 0 means 100
}

// ErrNotNow is returned by the actions when the chain or the member is
// not in a state the action applies to (a retry of a running member, a
// cancel of a finished chain).
var ErrNotNow = errors.New("not possible in this state")

// ErrReasonRequired is returned by Skip without a reason.
var ErrReasonRequired = errors.New("a reason is required")

// Retry builds a failed, canceled or stale member of an active chain
// again: a new action in the outbox (exactly once, as any other build),
// sent once its in-chain upstreams have succeeded, which they have for a
// member that was built. Its descendants wait for it again instead of
// being blocked. A stale member is retried without cache.
func (e *Engine) Retry(ctx context.Context, chainID int64, project string, by Actor) error {
	entry := AuditEntry{Action: AuditRetry, ChainID: chainID, Target: project}
	return e.operate(ctx, entry, by, func(t *txn, c *Chain) error {
		m := c.member(project)
		if m == nil {
			return fmt.Errorf("%s is not a member of chain %d: %w", project, chainID, ErrNotFound)
		}
		switch m.State {
		case Failed, Canceled, Stale:
		default:
			return fmt.Errorf("%s is %s: only a failed, canceled or stale member can be retried: %w", project, m.State, ErrNotNow)
		}
		noCache := m.State == Stale
		c.changed(m)
		m.requeue()
		m.NoCache = noCache
		c.touch(t.now)
		return t.settle(c)
	})
}

// Skip settles a failed, canceled, stale or blocked member of an active
// chain unchanged (MemberSkipped), for the reason given: its descendants
// wait for it no more, and those whose in-chain upstreams all ended
// skipped are skipped too (settle).
func (e *Engine) Skip(ctx context.Context, chainID int64, project, reason string, by Actor) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return fmt.Errorf("skip %s: %w", project, ErrReasonRequired)
	}
	entry := AuditEntry{Action: AuditSkip, ChainID: chainID, Target: project, Reason: reason}
	return e.operate(ctx, entry, by, func(t *txn, c *Chain) error {
		m := c.member(project)
		if m == nil {
			return fmt.Errorf("%s is not a member of chain %d: %w", project, chainID, ErrNotFound)
		}
		switch m.State {
		case Failed, Canceled, Stale, MemberBlocked:
		default:
			return fmt.Errorf("%s is %s: only a failed, canceled, stale or blocked member can be skipped: %w", project, m.State, ErrNotNow)
		}
		c.changed(m)
		m.State, m.Requeued = MemberSkipped, false
		m.Why = fmt.Sprintf("skipped by %s: %s", by.Name, reason)
		m.FinishedAt = t.now
		c.touch(t.now)
		return t.settle(c)
	})
}

// Cancel ends an active chain: the actions it has not sent are withdrawn
// (never sent), the pipelines it started that still run are left running
// on GitLab and no longer waited for, and every member that had not
// ended is marked canceled with who canceled it. The chain reacts to
// nothing after (ChainCanceled).
func (e *Engine) Cancel(ctx context.Context, chainID int64, reason string, by Actor) error {
	reason = strings.TrimSpace(reason)
	entry := AuditEntry{Action: AuditCancel, ChainID: chainID, Reason: reason}
	return e.operate(ctx, entry, by, func(t *txn, c *Chain) error {
		why := "chain canceled by " + by.Name
		if reason != "" {
			why += ": " + reason
		}
		for _, m := range c.Members {
			if !m.State.Unfinished() && m.State != MemberBlocked {
				continue
			}
			if m.ActionID != "" && waitsForAction(m.State) {
				if err := t.withdrawAny(m.ActionID); err != nil {
					return err
				}
			}
			w := why
			if m.PipelineID != 0 && (m.State == Triggered || m.State == MemberRunning) {
				w += fmt.Sprintf("; pipeline %d left running, not waited for", m.PipelineID)
			}
			m.State, m.Why, m.Requeued = Canceled, w, false
			if m.FinishedAt.IsZero() {
				m.FinishedAt = t.now
			}
		}
		c.State, c.EndedAt = ChainCanceled, t.now
		c.rewrite()
		c.touch(t.now)
		return nil
	})
}

// RebuildBy is Rebuild asked by a person: the same rebuild (ReasonRebuild
// naming them), with its audit entry written in the transaction that
// starts or merges the chain.
func (e *Engine) RebuildBy(ctx context.Context, project string, by Actor) (int64, error) {
	entry := AuditEntry{Action: AuditRebuild, Target: project}
	fill(&entry, by)
	return e.rebuild(ctx, project, Reason{Kind: ReasonRebuild, Detail: "asked by " + by.Name}, &entry)
}

// AuditRefused records an action that was refused before it reached the
// engine (the person's role, a missing CSRF token), with why.
func (e *Engine) AuditRefused(ctx context.Context, entry AuditEntry, by Actor, outcome string) error {
	fill(&entry, by)
	entry.At, entry.Outcome = e.now(), outcome
	err := e.cfg.Store.UpdateChains(ctx, func(tx Tx) error { return tx.AddAudit(ctx, entry) })
	if err != nil {
		return fmt.Errorf("record refused %s: %w", entry.Action, err)
	}
	return nil
}

// Audit returns the audit entries f selects, newest first.
func (e *Engine) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var out []AuditEntry
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		out, err = tx.Audit(ctx, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	return out, nil
}

func fill(entry *AuditEntry, by Actor) {
	entry.Actor, entry.ActorID, entry.Address = by.Name, by.ID, by.Address
}

// operate runs fn on the active chain entry.ChainID in one transaction
// and writes entry, done, with it. An unknown chain is ErrNotFound, one
// that no longer reacts ErrNotNow.
func (e *Engine) operate(ctx context.Context, entry AuditEntry, by Actor, fn func(*txn, *Chain) error) error {
	fill(&entry, by)
	err := e.update(ctx, nil, func(t *txn) error {
		var c *Chain
		for _, x := range t.chains {
			if x.ID == entry.ChainID && x.State.Active() {
				c = x
			}
		}
		if c == nil {
			stored, err := t.tx.Chain(t.ctx, entry.ChainID)
			if err != nil {
				return err
			}
			if stored.State == Merged {
				return fmt.Errorf("chain %d was merged into chain %d: act there: %w", stored.ID, stored.MergedInto, ErrNotNow)
			}
			return fmt.Errorf("chain %d is %s: %w", stored.ID, stored.State, ErrNotNow)
		}
		if err := fn(t, c); err != nil {
			return err
		}
		entry.At, entry.Outcome = t.now, OutcomeDone
		if err := t.tx.AddAudit(t.ctx, entry); err != nil {
			return fmt.Errorf("write the audit entry: %w", err)
		}
		t.after = append(t.after, func() {
			e.log.Info("action taken", "action", string(entry.Action), "chain_id", entry.ChainID,
				"project", entry.Target, "actor", entry.Actor, "address", entry.Address)
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", entry.Action, err)
	}
	return nil
}

// withdrawAny marks a pending action obsolete, claimed or not (as expiry
// does): a send in flight may still create its pipeline, which then is
// no member's any more.
func (t *txn) withdrawAny(id string) error {
	a, ok, err := t.tx.Action(t.ctx, id)
	if err != nil || !ok || a.State != ActionPending {
		return err
	}
	a.State, a.LeaseUntil = ActionObsolete, time.Time{}
	return t.tx.UpdateAction(t.ctx, a)
}
