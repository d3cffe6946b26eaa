package chain

import (
	"context"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// CatchUpResult says what one catch-up round did.
type CatchUpResult struct {
	Projects int // projects read (one request each)
	Applied  int // successes that started, merged into or unblocked a chain
	Failed   int // projects whose pipelines could not be read
}

// CatchUp is the safety net for triggers depsd never heard of: a pipeline
// of a root that succeeded while every replica was down, or whose webhook
// GitLab dropped (GitLab never resends one by itself). For each project in
// the graph that has something downstream, it reads the default-branch
// pipelines (every ref's, when another node of the project has something
// downstream; a success on a ref that may be a release tag costs one more
// request to tell) updated since the newest one it saw before (one request
// per project; never more than CatchUpWindow back), and applies each success
// exactly as its webhook would have been applied. A success already
// handled, by a webhook, the reconciler or an earlier round, starts
// nothing again (the engine finds it among the chains' reasons and
// members). A project read for the first time only notes its newest
// pipeline: depsd does not replay history from before it looked.
//
// Only one replica (the leader) should run it at a time; if two do, each
// success is still applied once, at the cost of the requests.
func (e *Engine) CatchUp(ctx context.Context) (CatchUpResult, error) {
	var res CatchUpResult
	if e.cfg.GitLab == nil {
		return res, fmt.Errorf("catch up: no GitLab client")
	}
	g, err := e.cfg.Graph(ctx)
	if err != nil {
		return res, fmt.Errorf("catch up: load graph: %w", err)
	}
	type root struct {
		p      Project
		cursor time.Time
		known  bool
		// others: a node besides the default branch has something
		// downstream: the project's pipelines of every ref are read.
		others bool
	}
	var roots []root
	now := e.now()
	// The projects to read, and whether a node besides the default
	// branch of each has something downstream.
	var paths []string
	others := map[string]bool{}
	for _, node := range g.Projects() {
		if len(g.Downstream(node)) == 0 {
			continue
		}
		path := deps.NodeProject(node)
		if _, seen := others[path]; !seen {
			paths = append(paths, path)
		}
		others[path] = others[path] || node != path
	}
	err = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		for _, path := range paths {
			p, ok, err := tx.Project(ctx, path)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			at, known, err := tx.CatchUpCursor(ctx, cursorKey(p.ID, others[path]))
			if err != nil {
				return err
			}
			roots = append(roots, root{p, at, known, others[path]})
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("catch up: %w", err)
	}
	var first error
	for _, r := range roots {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		floor := now.Add(-e.cfg.CatchUpWindow)
		since := r.cursor
		if !r.known || since.Before(floor) {
			since = floor
		}
		res.Projects++
		f := gitlab.PipelineFilter{Ref: r.p.DefaultBranch, Source: "any", UpdatedAfter: since, Limit: catchUpPage, OldestUpdatedFirst: true}
		if r.others {
			f.Ref = "" // every followed ref: the engine tells them apart
		}
		ps, err := e.cfg.GitLab.ListPipelines(ctx, r.p.ID, f)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Failed++
			e.log.Warn("catch up: list pipelines failed", "project", r.p.Path, "project_id", r.p.ID, "err", err)
			if first == nil {
				first = fmt.Errorf("catch up %s: %w", r.p.Path, err)
			}
			continue
		}
		// GitLab filters by whole seconds: what is not newer than the
		// cursor was seen by an earlier round. A project read for the first
		// time only sets the cursor.
		cursor := since
		if r.known && r.cursor.After(cursor) {
			cursor = r.cursor
		}
		seen := cursor
		stopped := false
		for _, p := range ps { // oldest update first
			if !p.UpdatedAt.After(seen) {
				continue
			}
			if p.UpdatedAt.After(cursor) {
				cursor = p.UpdatedAt
			}
			if !r.known || p.Status != "success" || p.Source == SourceChildPipeline {
				continue
			}
			ev := PipelineEvent{ProjectID: r.p.ID, Project: r.p.Path, PipelineID: p.ID, Status: p.Status,
				Ref: p.Ref, SHA: p.SHA, Source: p.Source, URL: p.WebURL, At: p.UpdatedAt}
			if r.others {
				var skip bool
				if ev.Tag, skip, err = e.releaseTag(ctx, r.p, p); err != nil {
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					e.log.Warn("catch up: get pipeline failed", "project", r.p.Path, "pipeline_id", p.ID, "err", err)
					res.Failed++
					// The next round reads on from this pipeline.
					cursor, stopped = p.UpdatedAt.Truncate(time.Second).Add(-time.Second), true
					break
				}
				if skip {
					continue
				}
			}
			outcome, err := e.ApplyPipelineEvent(ctx, ev)
			if err != nil {
				return res, fmt.Errorf("catch up: %w", err)
			}
			switch outcome {
			case outcomeStarted, outcomeMerged, outcomeUnblocked:
				res.Applied++
				e.obs.EventApplied("catch-up", outcome)
				e.log.Info("caught up a missed success", "project", r.p.Path, "pipeline_id", p.ID, "outcome", outcome)
			}
		}
		if len(ps) == catchUpPage && !stopped {
			// More were updated than one page holds: the next round reads
			// on from here, the page's last second again (GitLab filters
			// by whole seconds; a success read twice counts once).
			cursor = ps[len(ps)-1].UpdatedAt.Truncate(time.Second).Add(-time.Second)
		}
		if !r.known || cursor.After(r.cursor) {
			if err := e.setCursor(ctx, cursorKey(r.p.ID, r.others), cursor); err != nil {
				return res, err
			}
		}
	}
	return res, first
}

func (e *Engine) setCursor(ctx context.Context, projectID int64, at time.Time) error {
	err := e.cfg.Store.UpdateChains(ctx, func(tx Tx) error { return tx.SetCatchUpCursor(ctx, projectID, at) })
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	return nil
}

// cursorKey is where the catch-up keeps how far it read a project: under
// its id while it reads the default branch alone, under the negated id
// (no GitLab id is negative) once it reads every ref. A project that
// starts to be read at every ref (refs: was added, an upgrade from before
// nodes) is then read for the first time, which only notes where it
// stands: the successes of its other refs from before are never taken
// for missed ones, and nothing is rebuilt because of the change.
func cursorKey(projectID int64, everyRef bool) int64 {
	if everyRef {
		return -projectID
	}
	return projectID
}

// releaseTag tells whether a listed pipeline of p (lists do not say) ran
// for a tag, reading it from GitLab only when its ref is no followed
// branch and could be a release tag. skip: no node follows its ref.
func (e *Engine) releaseTag(ctx context.Context, p Project, pl gitlab.Pipeline) (tag, skip bool, err error) {
	if _, ok := eventNode(p, pl.Ref, false, nil); ok {
		return false, false, nil
	}
	rule, _ := e.cfg.Refs.For(p.Path)
	if !rule.FollowsTag(pl.Ref) {
		return false, true, nil
	}
	got, err := e.cfg.GitLab.GetPipeline(ctx, p.ID, pl.ID)
	if err != nil {
		return false, false, err
	}
	return got.Tag, !got.Tag, nil
}

// catchUpPage is how many pipelines of one project a catch-up round reads,
// oldest update first; a busier project is read on in the next rounds.
const catchUpPage = 100
