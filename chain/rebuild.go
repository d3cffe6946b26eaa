package chain

import (
	"context"
	"errors"
	"fmt"

	"gitlab.com/depsd/depsd/deps"
)

// ErrUnknownProject is returned by Rebuild for a project that is not in the
// dependency graph (not scanned, or out of scope).
var ErrUnknownProject = errors.New("project not in the dependency graph")

// Rebuild starts a chain at project: its pipeline is created first, then
// everything downstream in order (in first-level mode only the project is
// built; its success triggers its direct dependents). If the project or its
// downstream is already in an active chain, the request is merged into it
// (see startFull). It returns the id of the chain that holds the request.
// It only writes to the store: the outbox worker (of this process or of a
// running daemon) sends the actions. A project on a dependency cycle is an
// error: cycles are never followed.
//
// A scheduled rebuild (ReasonSchedule with its fire's time in At) or an
// image change's (ReasonDigest with the change in Detail and At) starts
// once however often it is asked for: when a chain already holds that very
// reason, Rebuild returns that chain's id and changes nothing. So a fire or
// a change whose process died before recording its outcome can simply be
// started again by the next.
//
// The project's create is due from the call on, and the transaction that
// decides a chain of thousands of members takes a second or more: the
// GitLab client's background requests wait meanwhile (holdNormal), as they
// do while the outbox then sends.
func (e *Engine) Rebuild(ctx context.Context, project string, reason Reason) (int64, error) {
	return e.rebuild(ctx, project, reason, nil)
}

// rebuild is Rebuild, writing audit (when not nil) with the chain it
// starts or merges into.
func (e *Engine) rebuild(ctx context.Context, project string, reason Reason, audit *AuditEntry) (int64, error) {
	e.holdNormal(true)
	defer e.holdNormal(false)
	g, err := e.cfg.Graph(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebuild %s: load graph: %w", project, err)
	}
	if !g.Has(project) {
		return 0, fmt.Errorf("rebuild %s: %w", project, ErrUnknownProject)
	}
	if reason.Kind == "" {
		reason.Kind = ReasonRebuild
	}
	reason.Project = project
	var id int64
	err = e.update(ctx, g, func(t *txn) error {
		if reason.At.IsZero() {
			reason.At = t.now
		}
		if reason.Kind == ReasonSchedule || reason.Kind == ReasonDigest {
			prev, ok, err := t.tx.ChainWithReason(t.ctx, reason)
			if err != nil {
				return err
			}
			if ok {
				id = prev
				t.after = append(t.after, func() {
					e.log.Info("rebuild already started", "project", project, "chain_id", id, "reason", string(reason.Kind), "at", reason.At)
				})
				return nil
			}
		}
		var c *Chain
		var err error
		if e.cfg.Mode == FirstLevel {
			c, err = t.rebuildOne(project, reason)
		} else {
			c, err = t.startFull(project, nil, reason)
		}
		if err != nil {
			return err
		}
		id = c.ID
		if audit != nil {
			audit.ChainID, audit.At, audit.Outcome = id, t.now, OutcomeDone
			if err := t.tx.AddAudit(t.ctx, *audit); err != nil {
				return fmt.Errorf("write the audit entry: %w", err)
			}
		}
		t.after = append(t.after, func() {
			e.log.Info("rebuild requested", "project", project, "chain_id", id, "reason", string(reason.Kind))
		})
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rebuild %s: %w", project, err)
	}
	return id, nil
}

// RebuildPlan returns the waves a rebuild of project would build, in
// order, each sorted: what `depsd rebuild --dry-run` prints. Projects on
// cycles, and those reachable only through one, are left out (see
// deps.Graph.Waves and Cycles for why).
func RebuildPlan(g *deps.Graph, project string) [][]string {
	return g.Waves(project)
}
