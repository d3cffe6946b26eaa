package gitlabtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Behavior says how the pipelines of a project run.
//
// A simulated pipeline is created with status "created", becomes "pending"
// at once, "running" after half of Duration and reaches its outcome after
// Duration. Each change posts a Pipeline Hook event. SetPipelineStatus
// takes a pipeline over: its simulation stops and it stays where it is put.
type Behavior struct {
	// Duration from creation to the outcome. Zero (or negative) is manual:
	// pipelines stay "created" until SetPipelineStatus moves them.
	Duration time.Duration
	// Outcome is the final status: "success" (the default), "failed" or
	// "canceled".
	Outcome string
	// Script lists the outcomes of the next pipelines, in creation order;
	// once it is used up, Outcome applies. E.g. {"failed"} with Outcome
	// "success" fails the first pipeline and passes the ones after it.
	Script []string
	// OnPush starts a pipeline (source "push") on each push to a branch
	// (SetFile, SetFileOn, DeleteFile, a commit or a branch made through
	// the API, a merge), like a project with a .gitlab-ci.yml.
	OnPush bool
	// OnTag starts a tag pipeline (source "push", tag true) on each tag
	// created (CreateTag, POST /repository/tags).
	OnTag bool
	// OnMergeRequest starts a merge request pipeline (source
	// "merge_request_event", ref refs/merge-requests/<iid>/head) when a
	// merge request is opened or reopened and on each push to its source
	// branch; such a push then starts no branch pipeline (GitLab's
	// workflow rules for merge request pipelines without duplicates).
	OnMergeRequest bool
	// Jobs makes pipelines of the jobs in the commit's .gitlab-ci.yml,
	// run by real GitLab Runners through the jobs API (jobs.go) instead
	// of simulated: Duration, Outcome and Script are then ignored.
	Jobs bool
}

// outcomes a simulated pipeline may end with.
var outcomes = []string{"success", "failed", "canceled"}

func (b Behavior) validate() error {
	for _, o := range append([]string{cmp.Or(b.Outcome, "success")}, b.Script...) {
		if !slices.Contains(outcomes, o) {
			return fmt.Errorf("outcome %q is not one of %v", o, outcomes)
		}
	}
	return nil
}

type behaviorState struct {
	b    Behavior
	next int // index of the next Script entry
}

// SetPipelineBehavior sets how pipelines of the project created from now
// on run. It restarts the project's Script.
func (s *Server) SetPipelineBehavior(projectPath string, b Behavior) error {
	if err := b.validate(); err != nil {
		return fmt.Errorf("set pipeline behavior of %s: %w", projectPath, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("set pipeline behavior of %s: project not found", projectPath)
	}
	b.Script = slices.Clone(b.Script)
	s.behaviors[p.id] = &behaviorState{b: b}
	return nil
}

// ClearPipelineBehavior makes the project's pipelines follow
// Options.Pipelines again.
func (s *Server) ClearPipelineBehavior(projectPath string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("clear pipeline behavior of %s: project not found", projectPath)
	}
	delete(s.behaviors, p.id)
	return nil
}

// behaviorOf returns the behavior of p's pipelines and its state (nil for
// the default behavior). Callers hold s.mu.
func (s *Server) behaviorOf(p *project) (Behavior, *behaviorState) {
	if st, ok := s.behaviors[p.id]; ok {
		return st.b, st
	}
	return s.defaultBehavior, nil
}

// nextRun returns the behavior of p's next pipeline and its outcome,
// consuming the next scripted outcome when the pipeline is simulated.
// Options.Pipelines' Script is shared by all projects that follow it.
// Callers hold s.mu.
func (s *Server) nextRun(p *project) (b Behavior, outcome string) {
	b, st := s.behaviorOf(p)
	if b.Duration <= 0 {
		return b, ""
	}
	if st == nil {
		st = &s.defaultScript
		st.b = b
	}
	if st.next < len(b.Script) {
		st.next++
		return b, b.Script[st.next-1]
	}
	return b, cmp.Or(b.Outcome, "success")
}

// RunPipeline creates a pipeline as GitLab does for something outside
// depsd, e.g. a developer's push (source defaults to "push"), on ref (a
// branch or a tag; the default branch when empty), and runs it with the
// project's behavior. It returns the pipeline id.
func (s *Server) RunPipeline(projectPath, ref, source string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return 0, fmt.Errorf("run pipeline of %s: project not found", projectPath)
	}
	ref = cmp.Or(ref, p.defaultBranch)
	sha, isTag, ok := p.refTarget(ref)
	if !ok {
		return 0, fmt.Errorf("run pipeline of %s: ref %s not found", projectPath, ref)
	}
	pl := s.newPipeline(p, ref, sha, cmp.Or(source, "push"), nil)
	pl.tag = isTag
	s.startRun(p, pl)
	return pl.id, nil
}

// startRun runs pl with p's behavior in a goroutine owned by the server.
// Callers hold s.mu.
func (s *Server) startRun(p *project, pl *pipeline) {
	b, outcome := s.nextRun(p)
	if b.Jobs && !s.closed {
		s.startJobs(p, pl)
		return
	}
	if b.Duration <= 0 || s.closed {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	pl.stopRun = cancel
	s.runs++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(ctx, pl, b.Duration, outcome)
	}()
}

// stopRun ends pl's simulation, if any. Callers hold s.mu.
func (s *Server) stopRun(pl *pipeline) {
	if pl.stopRun == nil {
		return
	}
	pl.stopRun()
	pl.stopRun = nil
	s.runs--
	s.notify()
}

// run moves pl through pending, running and outcome. A step is applied
// only while ctx (canceled under s.mu by stopRun and Close) is alive.
func (s *Server) run(ctx context.Context, pl *pipeline, d time.Duration, outcome string) {
	steps := []struct {
		at     time.Duration
		status string
	}{{0, "pending"}, {d / 2, "running"}, {d, outcome}}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i, st := range steps {
		timer.Reset(time.Until(start.Add(st.at)))
		select {
		case <-timer.C:
		case <-ctx.Done():
			s.endRun(pl, ctx)
			return
		}
		if st.status == "success" && s.publish(ctx, s.pathOf(pl), pl.id) != nil {
			// A job whose push fails fails its pipeline.
			st.status = "failed"
		}
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			s.endRun(pl, ctx)
			return
		}
		s.setStatus(pl, st.status)
		if i == len(steps)-1 {
			pl.stopRun()
			pl.stopRun = nil
			s.runs--
			s.notify()
		}
		s.mu.Unlock()
	}
}

// endRun accounts for a run stopped by Close (stopRun has already done so
// for a run taken over by SetPipelineStatus).
func (s *Server) endRun(pl *pipeline, ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pl.stopRun != nil && ctx.Err() != nil {
		pl.stopRun = nil
		s.runs--
		s.notify()
	}
}

// WaitPipeline waits until the pipeline has finished (success, failed,
// canceled or skipped) and returns it.
func (s *Server) WaitPipeline(ctx context.Context, pipelineID int64) (Pipeline, error) {
	var out Pipeline
	var missing bool
	err := s.waitFor(ctx, func() bool {
		pl, ok := s.inst.pipelines[pipelineID]
		if !ok {
			missing = true
			return true
		}
		out = s.export(pl)
		return finished(pl.status)
	})
	if err != nil {
		return out, fmt.Errorf("wait for pipeline %d (status %q): %w", pipelineID, out.Status, err)
	}
	if missing {
		return out, fmt.Errorf("wait for pipeline %d: not found", pipelineID)
	}
	return out, nil
}

// WaitIdle waits until no simulated pipeline is still running and no
// webhook delivery is queued or in flight.
func (s *Server) WaitIdle(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.runs == 0 && s.hooksOut.busy == 0 })
}
