package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// SendPending sends the due actions of the outbox until none is due, with
// up to Config.SendConcurrency creations in flight, and returns how many
// pipelines it created or adopted. Each action is claimed with a lease
// first, so workers in this and other processes never send the same action
// at once. An action claimed before (a worker crashed, or GitLab answered
// 5xx or timed out: the pipeline may exist) is first looked for among the
// project's recent api pipelines of the token's user by its
// DEPSD_ACTION_ID, and adopted if found. Retryable errors (including GitLab's pipeline-creation throttle)
// put the action back with exponential backoff; permanent ones (400
// Reference not found, 403, 404) fail the member with the reason and block
// its descendants. It returns an error only when the store fails or ctx
// ends.
func (e *Engine) SendPending(ctx context.Context) (int, error) {
	if e.cfg.GitLab == nil {
		return 0, fmt.Errorf("send pending actions: no GitLab client")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
	)
	s := e.newSenders(ctx, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	})
	s.spawn()
	s.wg.Wait()
	s.stopHolding()
	if firstErr != nil {
		return int(s.sent.Load()), fmt.Errorf("send pending actions: %w", firstErr)
	}
	return int(s.sent.Load()), nil
}

// senders runs the outbox's sends, up to Config.SendConcurrency at once.
// One claimer at a time claims due actions for every free slot in one
// transaction and starts a sender for each; a sender gives its slot back
// once GitLab answered its create (the outcome is recorded after, under the
// write lock). The claimer runs when the outbox is woken (an action written
// without a sender, a retry due, the poll) and when a slot comes free after
// a claim that ran out of slots before it ran out of due actions; it
// claims again if asked to while it claimed. While a claim waits for the
// write lock (behind the inbox), the sends that end meanwhile add their
// slots to the next claim instead of each waiting for a claim transaction
// of its own: a rebuild of 2,000 projects once spent a third of its time
// under the lock in claims of one action each. An action written while
// others are being sent is claimed at once rather than after a round of
// sends (a round whose last worker kept finding work used to send one
// action at a time).
type senders struct {
	e     *Engine
	ctx   context.Context
	fail  func(error) // a claimer's or sender's store error (it ends)
	slots chan struct{}
	wg    sync.WaitGroup
	sent  atomic.Int64
	busy  atomic.Int64 // senders running, until their outcome is recorded

	mu       sync.Mutex
	closed   bool // no more reservations (RunOutbox is ending)
	claiming bool // a claimer runs
	again    bool // a claim was asked for while it ran
	// mayBeDue: since the last claim began, something may have fallen due
	// (a wake-up), or that claim ran out of slots before it ran out of due
	// actions.
	mayBeDue bool
	// due: creates are due here — a claim runs, a send holds a slot, or
	// mayBeDue — as last told to the engine (noteDueLocked).
	due bool
}

// normalHolder is a GitLab client that can hold back its background
// requests (gitlab.Client.HoldNormal).
type normalHolder interface{ HoldNormal(held bool) }

// noteDueLocked tells the engine whether creates are due here, when that
// changed; s.mu is held. While any senders have creates due, the GitLab
// client holds its background requests (scans, the reconciler, the
// catch-up): between two sends, or between the event that makes a level's
// creates due and their sends, no request is waiting for the client's
// limits with the creates' priority, and a background read would take a
// token the creates are due to use.
func (s *senders) noteDueLocked() {
	due := s.claiming || s.mayBeDue || len(s.slots) > 0
	if due == s.due {
		return
	}
	s.due = due
	s.e.holdNormal(due)
}

// holdNormal counts the senders with creates due (and the Rebuild calls
// deciding a chain), and holds the client's background requests while
// there are any.
func (e *Engine) holdNormal(due bool) {
	h, ok := e.cfg.GitLab.(normalHolder)
	if !ok {
		return
	}
	e.dueMu.Lock()
	defer e.dueMu.Unlock()
	before := e.dueSenders > 0
	if due {
		e.dueSenders++
	} else {
		e.dueSenders--
	}
	if after := e.dueSenders > 0; after != before {
		h.HoldNormal(after)
	}
}

func (e *Engine) newSenders(ctx context.Context, fail func(error)) *senders {
	return &senders{e: e, ctx: ctx, fail: fail, slots: make(chan struct{}, e.cfg.SendConcurrency)}
}

// spawn makes sure a claimer runs, or that the one running claims again:
// something may be due (a wake-up: an action written without a sender, a
// retry due, the poll for other replicas' actions).
func (s *senders) spawn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mayBeDue = true
	s.claimLocked()
}

// slotFreed asks for a claim when a sender's slot came free, if the last
// claim may have left due actions for want of slots. A handed-over send
// ending needs none: a claim then would find nothing, after waiting for
// the write lock ahead of the inbox.
func (s *senders) slotFreed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mayBeDue {
		s.claimLocked()
	}
	s.noteDueLocked()
}

// claimLocked starts the claimer, or makes the one running claim again;
// s.mu is held.
func (s *senders) claimLocked() {
	if s.closed {
		return
	}
	if s.claiming {
		s.again = true
		return
	}
	s.claiming = true
	s.noteDueLocked()
	s.wg.Add(1)
	go s.claimer()
}

// claimer claims due actions for the free slots, a transaction per round,
// and claims again only if asked to while it claimed.
func (s *senders) claimer() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		s.again, s.mayBeDue = false, false
		s.mu.Unlock()
		full := len(s.slots) == cap(s.slots)
		var err error
		if s.ctx.Err() == nil && !full {
			full, err = s.e.claim(s.ctx, s)
		}
		if err != nil {
			s.fail(err)
		}
		s.mu.Lock()
		if full || err != nil {
			s.mayBeDue = true // more may be due than there were slots
		}
		if err != nil || s.ctx.Err() != nil || !s.again {
			s.claiming = false
			s.noteDueLocked()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// reserve takes a slot for an action a transaction is about to claim for
// these senders; the transaction then calls startClaimed once committed,
// or unreserve. It reports false when no slot is free or the senders are
// closing: the action is then written unclaimed, for a claim.
func (s *senders) reserve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	defer s.noteDueLocked()
	select {
	case s.slots <- struct{}{}:
		s.wg.Add(1)
		return true
	default:
		// More is due than there are slots: the next slot to come free
		// asks for a claim. Set here, before the refusing transaction
		// commits and starts its sends, so that a send ending before its
		// claimer is back from the claim still asks.
		s.mayBeDue = true
		return false
	}
}

// unreserve gives back a slot reserve took.
func (s *senders) unreserve() {
	<-s.slots
	s.mu.Lock()
	s.noteDueLocked()
	s.mu.Unlock()
	s.wg.Done()
}

// startClaimed sends a committed action claimed for these senders on the
// slot reserved for it, gives the slot back and asks for claims. If the
// senders stopped meanwhile, the send fails at once and the claim is
// abandoned, to be given back (releaseAbandoned) or to lapse with this
// process's liveness.
func (s *senders) startClaimed(a Action, chainID int64) {
	s.busy.Add(1)
	go func() {
		// The slot goes back once GitLab answered; the claimer started
		// then is counted (wg) before this sender stops counting.
		free := sync.OnceFunc(func() {
			<-s.slots
			s.slotFreed()
		})
		s.sendOne(a, chainID, free)
		free()
		s.busy.Add(-1)
		s.wg.Done()
	}()
}

// close stops reservations and waits for the claimer and the senders.
func (s *senders) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.stopHolding()
}

// stopHolding ends the senders' hold on background requests once they
// are done: an error or the context's end may have left mayBeDue set.
func (s *senders) stopHolding() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due {
		s.due = false
		s.e.holdNormal(false)
	}
}

// idle reports whether no send or claim is in flight, recordings
// included (and none can start but by spawn or a reservation).
func (s *senders) idle() bool { return len(s.slots) == 0 && s.busy.Load() == 0 }

// sendOne sends a claimed action (see Engine.send for callsDone).
func (s *senders) sendOne(a Action, chainID int64, callsDone func()) {
	done, err := s.e.send(s.ctx, a, chainID, callsDone)
	if err != nil {
		s.e.abandon(a)
		s.fail(err)
		return
	}
	if done {
		s.sent.Add(1)
	}
}

// claim leases due actions that are still wanted, the due first first,
// for as many as s has slots free, in one transaction, and hands them to s
// as it commits (as a transaction that writes an action does). Actions of
// members that no longer need them are marked obsolete on the way. full
// reports that it stopped for want of a free slot, not of due actions.
func (e *Engine) claim(ctx context.Context, s *senders) (full bool, err error) {
	err = e.update(ctx, nil, func(t *txn) error {
		t.out, full = s, false
		for {
			next, found, err := t.tx.DueAction(t.ctx, t.now)
			if err != nil || !found {
				return err
			}
			if t.handedHere(next.ID) {
				// Claimed here already, yet due: claims of an owner
				// without a live liveness lease are (see DueAction).
				return nil
			}
			c, m := t.memberByAction(next.ID)
			if m == nil || !waitsForAction(m.State) {
				next.State, next.LeaseUntil = ActionObsolete, time.Time{}
				if err := t.tx.UpdateAction(t.ctx, next); err != nil {
					return err
				}
				continue
			}
			if !s.reserve() {
				full = true // the next send to end asks for another claim
				return nil
			}
			t.handed = append(t.handed, handedAction{next, c.ID}) // given back if this does not commit
			if p, ref, known, err := t.node(next.Project); err != nil {
				return err
			} else if known {
				next.ProjectID, next.Ref, next.Ident = p.ID, ref, p.Ident
			}
			if next.ClaimedAt.IsZero() {
				next.ClaimedAt = t.now
				if next.Attempts > 0 {
					next.ClaimedAt = next.CreatedAt // claimed before claims were dated
				}
			}
			next.Attempts++
			next.LeaseUntil = t.now.Add(e.cfg.Lease)
			next.ClaimedBy = e.cfg.Owner
			if err := t.tx.UpdateAction(t.ctx, next); err != nil {
				return err
			}
			t.handed[len(t.handed)-1].a = next
		}
	})
	if err != nil {
		return false, fmt.Errorf("claim actions: %w", err)
	}
	return full, nil
}

// send creates (or adopts) the pipeline of a claimed action and records the
// result. done reports whether a pipeline now exists for it. callsDone is
// called once GitLab has answered, before the result is recorded (a
// sender's slot bounds the calls to GitLab in flight, not the recordings,
// which wait for the write lock).
func (e *Engine) send(ctx context.Context, a Action, chainID int64, callsDone func()) (done bool, err error) {
	if e.sendHook != nil {
		e.sendHook(a)
	}
	log := e.log.With("project", a.Project, "project_id", a.ProjectID, "chain_id", chainID, "action_id", a.ID)
	if a.Kind == ActionPins {
		return e.sendPins(ctx, log, a, chainID, callsDone)
	}
	// The calls must end well before the lease does: once it runs out
	// another worker may claim the action, and a create still in flight
	// here (the client waits out 429s) would make a second pipeline.
	callCtx, cancelCalls := context.WithTimeout(gitlab.WithPriority(ctx, gitlab.PriorityUrgent), e.cfg.Lease/2) // ahead of background reads
	defer cancelCalls()
	var p gitlab.Pipeline
	adopted := false
	if a.Attempts > 1 {
		found, ok, err := e.findSent(callCtx, a)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			log.Warn("look for an earlier pipeline of the action failed", "err", err)
			callsDone()
			return false, e.recordError(ctx, a, err, false)
		}
		if ok {
			p, adopted = found, true
			log.Info("adopted pipeline created by an earlier attempt", "pipeline_id", p.ID)
		}
	}
	if !adopted {
		p, err = e.create(callCtx, log, &a, chainID)
		if err != nil {
			if ctx.Err() != nil {
				// Stopped: shutdown, or this process's liveness lease could
				// not be renewed. GitLab may still act on a request it
				// received; the next claim (after RunOutbox gives this one
				// back, or another replica's once the liveness lease ran
				// out) looks for the pipeline before creating it.
				return false, ctx.Err()
			}
			permanent := gitlab.IsPermanent(err)
			var cv *cannotValidateError
			if errors.As(err, &cv) {
				permanent = true
				log.Info("project cannot validate", "err", err)
			} else {
				log.Warn("create pipeline failed", "err", err, "permanent", permanent)
			}
			callsDone()
			return false, e.retryStore(ctx, log, func() error { return e.recordError(ctx, a, err, permanent) })
		}
	}
	callsDone()
	// The pipeline exists now: record it even if shutdown began meanwhile,
	// or the action would wait out its lease to be adopted.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Lease/2)
	defer cancel()
	if err := e.retryStore(recCtx, log, func() error { return e.recordSent(recCtx, a, p) }); err != nil {
		return false, err
	}
	e.obs.PipelineCreated(a.Project, adopted)
	log.Info("pipeline created for chain member", "pipeline_id", p.ID, "adopted", adopted)
	return true, nil
}

// create creates the action's pipeline the way its project identifies
// pipelines (a.Ident). A project that refuses variables is asked again at
// once with the depsd_action_id input, and one that refuses that input
// without either; what was learned is stored for the project (a.Ident
// follows), so the refusal costs one request, once, and no failure.
func (e *Engine) create(ctx context.Context, log *slog.Logger, a *Action, chainID int64) (gitlab.Pipeline, error) {
	noCacheRefused := false
	for {
		p, err := e.cfg.GitLab.CreatePipeline(ctx, a.ProjectID, a.Ref, a.createOptions(chainID, noCacheRefused))
		var next PipelineIdent
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, gitlab.ErrInputsRefused) && a.Kind == ActionValidate:
			// The project declares depsd_action_id but not the validation
			// inputs: it cannot validate. Nothing is learned of how its
			// release builds are identified.
			return p, &cannotValidateError{err}
		case errors.Is(err, gitlab.ErrInputsRefused) && a.Ident == IdentInputs && a.NoCache && !noCacheRefused:
			// The project declares depsd_action_id but not depsd_no_cache:
			// the same inputs less that one, and nothing to learn.
			log.Info("project refused the depsd_no_cache input; building without it", "err", err)
			noCacheRefused = true
			continue
		case errors.Is(err, gitlab.ErrVariablesRefused) && (a.Ident == "" || a.Ident == IdentVariables):
			next = IdentInputs
			if e.noInputs.Load() {
				next = IdentNone
			}
			if next == IdentNone && a.Kind == ActionValidate {
				if err := e.learnIdent(ctx, a.ProjectID, next); err != nil {
					return gitlab.Pipeline{}, err
				}
				return p, &cannotValidateError{err}
			}
		case errors.Is(err, gitlab.ErrInputsRefused) && a.Ident == IdentInputs:
			next = IdentNone
		default:
			return p, err
		}
		log.Info("project refused how depsd identifies its pipelines; asking another way",
			"ident", string(a.Ident), "next", string(next), "err", err)
		if err := e.learnIdent(ctx, a.ProjectID, next); err != nil {
			return gitlab.Pipeline{}, err
		}
		a.Ident = next
	}
}

// cannotValidateError is a validation build GitLab refused for the
// inputs or variables it carries: the project cannot validate (its member
// is skipped, not failed).
type cannotValidateError struct{ err error }

func (e *cannotValidateError) Error() string { return "cannot validate: " + e.err.Error() }
func (e *cannotValidateError) Unwrap() error { return e.err }

// learnIdent stores how a project's pipelines are identified.
func (e *Engine) learnIdent(ctx context.Context, projectID int64, ident PipelineIdent) error {
	err := e.update(ctx, nil, func(t *txn) error { return t.tx.SetPipelineIdent(t.ctx, projectID, ident) })
	if err != nil {
		return fmt.Errorf("store how project %d identifies pipelines: %w", projectID, err)
	}
	return nil
}

// retryStore runs record until it succeeds or ctx ends, waiting a little
// longer after each failure. What the worker records after talking to
// GitLab must not be dropped because the store was briefly unreachable (a
// database restart): the action would stay claimed until its lease ran out,
// stalling its chain for minutes.
func (e *Engine) retryStore(ctx context.Context, log *slog.Logger, record func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := record()
		if err == nil {
			return nil
		}
		log.Warn("recording the outcome of a send failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// findSent looks for the pipeline an earlier attempt of the action may
// have created. Where the project takes variables, that is the one
// carrying the action's id among the api pipelines the token's user
// created on the ref, updated since shortly before the action was written:
// anyone who may set variables in the project can copy the id into a
// pipeline of their own, which is not depsd's build. Elsewhere see
// findSentWithoutID.
func (e *Engine) findSent(ctx context.Context, a Action) (gitlab.Pipeline, bool, error) {
	if a.Ident == IdentInputs || a.Ident == IdentNone {
		return e.findSentWithoutID(ctx, a)
	}
	user, err := e.cfg.GitLab.CurrentUser(ctx)
	if err != nil {
		return gitlab.Pipeline{}, false, err
	}
	since := a.CreatedAt.Add(-e.cfg.AdoptWindow)
	ps, err := e.cfg.GitLab.ListPipelines(ctx, a.ProjectID, gitlab.PipelineFilter{
		Ref: a.Ref, Source: "api", Username: user.Username, UpdatedAfter: since, Limit: 50,
	})
	if err != nil {
		return gitlab.Pipeline{}, false, err
	}
	for _, p := range ps {
		if !p.CreatedAt.IsZero() && p.CreatedAt.Before(since) {
			continue
		}
		vars, err := e.cfg.GitLab.PipelineVariables(ctx, a.ProjectID, p.ID)
		if err != nil {
			return gitlab.Pipeline{}, false, err
		}
		if vars[VarActionID] == a.ID {
			return p, true, nil
		}
	}
	return gitlab.Pipeline{}, false, nil
}

// findSentWithoutID looks for the pipeline an earlier attempt of the
// action may have created in a project that refuses variables: among the
// api pipelines on the ref created by the token's user since the action
// was first claimed (less Config.ClockSkew: GitLab stamps created_at with
// its own clock), those no other action created and no member counted or
// chain started with, it adopts the one whose name carries the action's id
// (a workflow:name using the depsd_action_id input), else the oldest: when
// the creates of two actions of the project and ref were both lost, a
// later claim can adopt only pipelines created after it, so the resend of
// the earlier claim leaves it the newer ones (taking the newest, as GitLab
// lists them, would leave the later action none, and a third build).
//
// What remains possible: another api pipeline on that ref, created with
// depsd's token by something other than depsd after the claim and before
// depsd's own create (or instead of it, when the create never reached
// GitLab), is taken for depsd's: the member then counts that pipeline
// and no second one is created. The input in workflow:name removes that
// case.
func (e *Engine) findSentWithoutID(ctx context.Context, a Action) (gitlab.Pipeline, bool, error) {
	user, err := e.cfg.GitLab.CurrentUser(ctx)
	if err != nil {
		return gitlab.Pipeline{}, false, err
	}
	since := a.ClaimedAt
	if since.IsZero() {
		since = a.CreatedAt
	}
	since = since.Add(-e.cfg.ClockSkew)
	ps, err := e.cfg.GitLab.ListPipelines(ctx, a.ProjectID, gitlab.PipelineFilter{
		Ref: a.Ref, Source: "api", Username: user.Username, CreatedAfter: since, Limit: 100,
	})
	if err != nil {
		return gitlab.Pipeline{}, false, err
	}
	var free []gitlab.Pipeline
	err = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		for _, p := range ps {
			if !p.CreatedAt.IsZero() && p.CreatedAt.Before(since) {
				continue
			}
			seen, err := tx.PipelineSeen(ctx, p.ID)
			if err != nil {
				return err
			}
			if (seen.HasAction && seen.Action.ID != a.ID) || seen.Counted || seen.Started {
				continue
			}
			free = append(free, p)
		}
		return nil
	})
	if err != nil {
		return gitlab.Pipeline{}, false, fmt.Errorf("look up pipelines of project %d: %w", a.ProjectID, err)
	}
	if len(free) == 0 {
		return gitlab.Pipeline{}, false, nil
	}
	for _, p := range free {
		if strings.Contains(p.Name, a.ID) {
			return p, true, nil
		}
	}
	oldest := free[0]
	for _, p := range free[1:] {
		if p.ID < oldest.ID {
			oldest = p
		}
	}
	return oldest, true, nil
}

// recordError puts a failed action back with backoff, or, when the error
// is permanent, fails it and its member (blocking the member's descendants).
func (e *Engine) recordError(ctx context.Context, a Action, cause error, permanent bool) error {
	err := e.update(ctx, nil, func(t *txn) error {
		cur, ok, err := t.tx.Action(t.ctx, a.ID)
		if err != nil || !ok || cur.State != ActionPending {
			return err // meanwhile adopted through a webhook, or gone
		}
		cur.LeaseUntil, cur.LastError = time.Time{}, cause.Error()
		c, m := t.memberByAction(cur.ID)
		if permanent {
			cur.State = ActionFailed
		} else {
			cur.NextAttemptAt = t.now.Add(e.backoff(cur.Attempts))
		}
		if err := t.tx.UpdateAction(t.ctx, cur); err != nil {
			return err
		}
		if m == nil || !waitsForAction(m.State) {
			return nil
		}
		what := "create pipeline"
		if cur.Kind == ActionPins {
			what = "move pins"
		}
		if cv := (*cannotValidateError)(nil); errors.As(cause, &cv) {
			m.State, m.FinishedAt = MemberSkipped, t.now
			m.Why = "cannot validate: " + CannotValidateSnippet + " (GitLab: " + cv.err.Error() + ")"
			c.touch(t.now)
			return t.settle(c)
		}
		if permanent {
			m.State, m.FinishedAt = Failed, t.now
			m.Why = what + ": " + cause.Error()
			c.touch(t.now)
			return t.settle(c)
		}
		m.Why = fmt.Sprintf("%s failed (attempt %d), retrying at %s: %v",
			what, cur.Attempts, cur.NextAttemptAt.Format(time.RFC3339), cause)
		c.touch(t.now)
		return nil
	})
	if err != nil {
		return fmt.Errorf("record error of action %s: %w", a.ID, err)
	}
	e.obs.ActionError(a.Project, permanent)
	return nil
}

// RunOutbox sends due actions until ctx ends: at once when woken
// (NotifyOutbox, or an engine of this process wrote an action), when the
// next retry falls due, and every PollInterval for actions written by
// another process. Errors are logged and retried.
//
// Whenever no send is in flight, it first gives back the claims of this
// engine whose send ended without an outcome (see abandon), so that a
// RunOutbox stopped in the middle of a send and started again (the daemon
// does so while its liveness lease cannot be renewed) resends at once
// rather than after the claim's Lease; the next claim looks for the
// pipeline first.
func (e *Engine) RunOutbox(ctx context.Context) error {
	if e.cfg.GitLab == nil {
		return fmt.Errorf("run outbox: no GitLab client")
	}
	s := e.newSenders(ctx, func(err error) {
		if ctx.Err() == nil {
			e.log.Error("outbox worker failed", "err", err)
		}
	})
	if !e.outbox.CompareAndSwap(nil, s) {
		return fmt.Errorf("run outbox: already running")
	}
	defer func() {
		e.outbox.Store(nil)
		s.close()
	}()
	for {
		if s.idle() {
			if err := e.releaseAbandoned(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("give back abandoned claims failed", "err", err)
			}
		}
		s.spawn()
		wait := e.cfg.PollInterval
		err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
			due, ok, err := tx.NextDue(ctx)
			if ok {
				wait = min(wait, max(due.Sub(e.now()), 10*time.Millisecond))
			}
			return err
		})
		if err != nil && ctx.Err() == nil {
			e.log.Error("outbox worker failed", "err", err)
		}
		if !e.sleep(ctx, e.outboxC, wait) {
			return nil
		}
	}
}

// abandon remembers a claimed action whose send ended without recording
// an outcome: its claim stands in the store until releaseAbandoned gives
// it back (or its owner's liveness lease or the claim's lease runs out).
func (e *Engine) abandon(a Action) {
	e.abandonMu.Lock()
	defer e.abandonMu.Unlock()
	if e.abandoned == nil {
		e.abandoned = map[string]Action{}
	}
	e.abandoned[a.ID] = a
}

// releaseAbandoned makes the abandoned claims due again, those that are
// still the same claim (same owner and attempt, still pending). It must
// not run while a send of this engine is in flight: RunOutbox calls it
// when none is.
func (e *Engine) releaseAbandoned(ctx context.Context) error {
	e.abandonMu.Lock()
	defer e.abandonMu.Unlock()
	if len(e.abandoned) == 0 {
		return nil
	}
	released := 0
	err := e.update(ctx, nil, func(t *txn) error {
		released = 0
		for id, a := range e.abandoned {
			cur, ok, err := t.tx.Action(t.ctx, id)
			if err != nil {
				return err
			}
			if !ok || cur.State != ActionPending || cur.Attempts != a.Attempts || cur.ClaimedBy != a.ClaimedBy || cur.LeaseUntil.IsZero() {
				continue // recorded meanwhile, or taken over by another sender
			}
			cur.LeaseUntil = time.Time{}
			if err := t.tx.UpdateAction(t.ctx, cur); err != nil {
				return err
			}
			released++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("give back abandoned claims: %w", err)
	}
	if released > 0 {
		e.log.Info("gave back claims of sends that were stopped", "actions", released)
	}
	clear(e.abandoned)
	return nil
}
