package chain

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// txn is the working set of one store transaction: the active chains as
// loaded, the graph, and what to do once the transaction committed. Every
// change to chains goes through one, so that state and actions are written
// together.
type txn struct {
	e        *Engine
	ctx      context.Context
	tx       Tx
	now      time.Time
	g        *deps.Graph // nil when the operation needs no graph
	chains   []*Chain    // active chains, plus those created or merged away here
	was      map[int64]State
	projects map[string]projectLookup
	actions  int      // actions written
	after    []func() // run after commit: observer calls, logs
	// handed are the actions written already claimed for this engine's
	// running outbox, each with a sender slot reserved; update hands them
	// over once committed, or gives the slots back.
	handed []handedAction
	out    *senders // the outbox they are for
	// statusesWanted: a chain's commit status changed (wantStatuses); the
	// status sender is woken once committed.
	statusesWanted bool
}

type handedAction struct {
	a       Action
	chainID int64
}

type projectLookup struct {
	p  Project
	ok bool
}

// update runs fn on a txn in one store write transaction and, once it
// committed, runs the deferred calls and wakes the outbox worker if actions
// were written.
func (e *Engine) update(ctx context.Context, g *deps.Graph, fn func(*txn) error) error {
	var t *txn
	// ctx decides whether the transaction starts; once it has, its
	// statements run to the end (canceling one midway can leave SQLite's
	// write lock behind on the connection).
	outer := ctx
	ctx = context.WithoutCancel(ctx)
	out := e.outbox.Load()
	err := e.cfg.Store.UpdateChains(outer, func(tx Tx) error {
		if t != nil { // the store runs fn again
			t.unreserve()
		}
		chains, err := tx.ActiveChains(ctx)
		if err != nil {
			return fmt.Errorf("load active chains: %w", err)
		}
		t = &txn{e: e, ctx: ctx, tx: tx, now: e.now(), g: g, chains: chains, out: out,
			was: make(map[int64]State, len(chains)), projects: map[string]projectLookup{}}
		for _, c := range chains {
			t.was[c.ID] = c.State
			c.begin()
		}
		if err := fn(t); err != nil {
			return err
		}
		if err := t.checkHanded(); err != nil {
			return err
		}
		return t.flush()
	})
	if err != nil {
		if t != nil {
			t.unreserve()
		}
		return err
	}
	for _, f := range t.after {
		f()
	}
	for _, h := range t.handed {
		t.out.startClaimed(h.a, h.chainID)
	}
	if t.actions > len(t.handed) {
		e.NotifyOutbox()
	}
	if t.statusesWanted {
		e.NotifyStatuses()
	}
	return nil
}

// saveChanges writes the chains changed so far, if any, without ending the
// transaction, and starts following their changes afresh, as a new
// transaction would: what a transaction applies after it (the next event
// of a batch) sees those changes in the store as in a transaction of its
// own.
func (t *txn) saveChanges() error {
	if !t.unsaved() {
		return nil
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, c := range t.chains {
		t.was[c.ID] = c.State
		c.begin()
	}
	return nil
}

// unsaved reports whether t holds a change to a chain not yet written to
// the store (chains are written by saveChanges and when t commits).
func (t *txn) unsaved() bool {
	for _, c := range t.chains {
		if c.dirty {
			return true
		}
	}
	return false
}

// checkHanded makes sure each action claimed for the outbox in this
// transaction is still wanted as it ends, and by which chain (a later step
// of the same transaction may have merged or ended the chain): an action
// no longer found pending is given back unclaimed, so that a claim deals
// with it (claim marks what is no longer wanted obsolete).
func (t *txn) checkHanded() error {
	kept := t.handed[:0]
	for _, h := range t.handed {
		var chainID int64
		for _, c := range t.chains {
			if m := c.byAction(h.a.ID); c.State.Active() && m != nil && waitsForAction(m.State) {
				chainID = c.ID
				break
			}
		}
		if chainID != 0 {
			h.chainID = chainID
			kept = append(kept, h)
			continue
		}
		// As the store holds it now: a later step may have changed it
		// (withdraw marks it obsolete).
		a, ok, err := t.tx.Action(t.ctx, h.a.ID)
		if err != nil {
			return fmt.Errorf("give back action %s: %w", h.a.ID, err)
		}
		if ok {
			a.Attempts, a.LeaseUntil, a.ClaimedBy = 0, time.Time{}, ""
			if err := t.tx.UpdateAction(t.ctx, a); err != nil {
				return fmt.Errorf("give back action %s: %w", h.a.ID, err)
			}
		}
		t.out.unreserve()
	}
	t.handed = kept
	return nil
}

// handedHere reports whether this transaction claimed action id for the
// outbox: it is not being sent yet.
func (t *txn) handedHere(id string) bool {
	return slices.ContainsFunc(t.handed, func(h handedAction) bool { return h.a.ID == id })
}

// unreserve gives back the sender slots of the actions this transaction
// claimed, when it did not commit.
func (t *txn) unreserve() {
	for range t.handed {
		t.out.unreserve()
	}
	t.handed = nil
}

// flush saves the chains that changed. A chain that ends is written whole
// (expiry changes its members directly).
func (t *txn) flush() error {
	for _, c := range t.chains {
		if !c.dirty {
			c.end()
			continue
		}
		if err := t.wantStatuses(c); err != nil {
			return err
		}
		if was, ok := t.was[c.ID]; ok && was.Active() && !c.State.Active() {
			c.rewrite()
		}
		if err := t.tx.SaveChain(t.ctx, c); err != nil {
			return fmt.Errorf("save chain %d: %w", c.ID, err)
		}
		c.end()
		if c.State != t.was[c.ID] && (c.State == Finished || c.State == Expired) && !c.IsValidation() {
			state, d, id := c.State, c.EndedAt.Sub(c.StartedAt), c.ID
			t.after = append(t.after, func() {
				t.e.obs.ChainEnded(state, d)
				t.e.log.Info("chain ended", "chain_id", id, "state", string(state), "duration", d)
			})
		}
	}
	return nil
}

// project looks a project up in the store, once per transaction.
func (t *txn) project(path string) (Project, bool, error) {
	if l, ok := t.projects[path]; ok {
		return l.p, l.ok, nil
	}
	p, ok, err := t.tx.Project(t.ctx, path)
	if err != nil {
		return Project{}, false, fmt.Errorf("look up project %s: %w", path, err)
	}
	t.projects[path] = projectLookup{p, ok}
	return p, ok, nil
}

// node returns the project of node and the ref its pipelines run on
// (buildRef); ok is false for a project no longer stored or a node it no
// longer has.
func (t *txn) node(node string) (p Project, ref string, ok bool, err error) {
	p, ok, err = t.project(deps.NodeProject(node))
	if err != nil || !ok {
		return p, "", ok, err
	}
	ref, ok = buildRef(node, p, t.e.cfg.Refs)
	return p, ref, ok, nil
}

// memberByAction finds the member whose current action is id, and records
// it as changed: callers hold it to change it. It looks in each active
// chain's index of actions first and, only when none has it (the member
// moved on), at every member.
func (t *txn) memberByAction(id string) (*Chain, *Member) {
	if id == "" {
		return nil, nil
	}
	for _, c := range t.chains {
		if c.State.Active() {
			if m := c.byAction(id); m != nil {
				c.changed(m)
				return c, m
			}
		}
	}
	for _, c := range t.chains {
		if !c.State.Active() {
			continue
		}
		for _, m := range c.Members {
			if m.ActionID == id {
				c.indexAction(m)
				c.changed(m)
				return c, m
			}
		}
	}
	return nil, nil
}

// settle settles c and writes an action for every member that became
// ready. A member that cannot be built (its project left the store) fails
// at once, which may block others: settle repeats until nothing changes.
func (t *txn) settle(c *Chain) error {
	for {
		ready := c.settle(t.now)
		if len(ready) == 0 {
			return nil
		}
		again := false
		for _, m := range ready {
			ok, err := t.enqueue(c, m)
			if err != nil {
				return err
			}
			again = again || !ok
		}
		if !again {
			return nil
		}
	}
}

// enqueue writes the action m needs now that it is ready and reports
// whether it could: the merge request moving its pins when it pins an
// upstream that changed (enqueuePins), else its build. false means the
// member ended instead (failed or skipped): its chain settles again.
func (t *txn) enqueue(c *Chain, m *Member) (bool, error) {
	if c.IsValidation() {
		if c.Validation.Canceled != "" {
			m.State, m.Why, m.FinishedAt = Canceled, c.Validation.Canceled, t.now
			c.changed(m)
			c.touch(t.now)
			return false, nil
		}
		return t.enqueueValidation(c, m)
	}
	if handled, done, err := t.enqueuePins(c, m); handled || err != nil {
		return done, err
	}
	return t.enqueuePipeline(c, m)
}

// enqueuePipeline writes the action that builds m and reports whether it
// could.
func (t *txn) enqueuePipeline(c *Chain, m *Member) (bool, error) {
	p, ref, ok, err := t.node(m.Project)
	if err != nil {
		return false, err
	}
	if !ok {
		m.State, m.Why, m.FinishedAt = Failed, "project is no longer in scope (or no longer has this ref)", t.now
		c.changed(m)
		c.touch(t.now)
		return false, nil
	}
	ups := m.Upstreams
	if c.Mode == FirstLevel {
		ups = slices.DeleteFunc(slices.Clone(c.Roots), func(r string) bool { return r == m.Project })
	}
	a := Action{
		ID: newActionID(), ChainID: c.ID, Project: m.Project, ProjectID: p.ID, Ref: ref,
		Upstreams: slices.Clone(ups), NoCache: m.NoCache, State: ActionPending, NextAttemptAt: t.now, CreatedAt: t.now,
		Ident: p.Ident,
	}
	return t.queueBuild(c, m, p.ID, &a, "build queued")
}

// queueBuild writes action a of member m to the outbox and moves m to it:
// its pipeline is to come. what names the build in the log.
func (t *txn) queueBuild(c *Chain, m *Member, projectID int64, a *Action, what string) (bool, error) {
	if err := t.addAction(c, a); err != nil {
		return false, err
	}
	m.ProjectID, m.ActionID = projectID, a.ID
	m.PipelineID, m.PipelineURL, m.TriggeredAt, m.FinishedAt = 0, "", time.Time{}, time.Time{}
	m.Builds++
	c.changed(m)
	c.indexAction(m)
	c.touch(t.now)
	chainID, project, actionID := c.ID, m.Project, a.ID
	t.after = append(t.after, func() {
		t.e.log.Info(what, "chain_id", chainID, "project", project, "action_id", actionID)
	})
	return true, nil
}

// addAction writes a new action of chain c to the outbox, claimed here,
// as claim would, when this engine's outbox runs and has a sender free:
// it is then sent as soon as this transaction commits, without a claim of
// its own or a wake-up of the outbox.
func (t *txn) addAction(c *Chain, a *Action) error {
	// A validation's build is claimed after every release action due
	// (lower priority), never handed over at once.
	handed := a.Kind != ActionValidate && t.out != nil && t.out.reserve()
	if handed {
		a.Attempts, a.LeaseUntil, a.ClaimedBy, a.ClaimedAt = 1, t.now.Add(t.e.cfg.Lease), t.e.cfg.Owner, t.now
	}
	if err := t.tx.AddAction(t.ctx, *a); err != nil {
		if handed {
			t.out.unreserve()
		}
		return fmt.Errorf("write action for %s: %w", a.Project, err)
	}
	if handed {
		t.handed = append(t.handed, handedAction{*a, c.ID})
	}
	t.actions++
	return nil
}

// newChain creates an empty running chain.
func (t *txn) newChain(mode Mode) (*Chain, error) {
	id, err := t.tx.NewChainID(t.ctx)
	if err != nil {
		return nil, fmt.Errorf("allocate chain id: %w", err)
	}
	// Ids handed out in this transaction are not stored yet.
	for _, c := range t.chains {
		id = max(id, c.ID+1)
	}
	c := &Chain{ID: id, Mode: mode, State: Running, StartedAt: t.now, UpdatedAt: t.now, dirty: true}
	c.begin()
	c.reshaped()
	t.chains = append(t.chains, c)
	return c, nil
}
