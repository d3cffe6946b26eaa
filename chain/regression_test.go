package chain_test

// Regression tests from a review of the engine against ARCHITECTURE.md "Chain
// semantics": each comment describes a bug as it was found; the test keeps
// it fixed.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
)

// addForeignPipeline puts a pipeline depsd did not create on the fake
// GitLab (a developer's push), so that the reconciler can find it.
func (e *env) addForeignPipeline(project string, id int64, status, source string) {
	e.gl.mu.Lock()
	defer e.gl.mu.Unlock()
	now := e.clock.Now()
	e.gl.pipelines = append(e.gl.pipelines, fakePipeline{Pipeline: gitlab.Pipeline{
		ID: id, ProjectID: e.ids[project], Ref: "main", Status: status, Source: source,
		CreatedAt: now, UpdatedAt: now,
	}})
}

// Finding 1: the success that unblocks a failed member is not recorded as
// handled (no Reason, so PipelineSeen.Started stays false). When the same
// pipeline's success is applied a second time, which happens when the
// reconciler (reconcileBroken, which bypasses the inbox) and the webhook
// both see it, or when a job of that pipeline is retried (same pipeline
// id), the second application treats it as a new, untracked success and
// starts/merges a chain at the project. Its descendants are requeued or
// reset and built a second time.
func TestReviewUnblockingSuccessAppliedTwiceRebuildsDescendants(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*env, int64) {
		e := newEnv(t, chain.Full, "base>a", "a>b")
		id := e.rebuild("base")
		e.send()
		e.finish("base", "success")
		e.send()
		e.finish("a", "failed")
		e.wantStates(id, "a=failed b=blocked base=success")
		return e, id
	}
	check := func(e *env, id int64, wantA int) {
		e.t.Helper()
		v := e.chain(id)
		if m := member(v, "b"); m.Requeued {
			e.t.Errorf("b requeued by a second application of the same success (pipeline 9000): b will be built twice")
		}
		e.finish("b", "success")
		e.send()
		if v := e.chain(id); v.State != chain.Finished {
			e.t.Errorf("chain state = %s (%s), want finished", v.State, states(v))
		}
		e.wantCounts(map[string]int{"a": wantA, "b": 1})
	}

	t.Run("reconciler then late webhook", func(t *testing.T) {
		e, id := setup(t)
		e.clock.Advance(time.Minute)
		e.addForeignPipeline("a", 9000, "success", "push") // its webhook is late (inbox backlog)
		if n, err := e.engine.Reconcile(e.ctx); n != 1 || err != nil {
			t.Fatalf("Reconcile = %d, %v; want 1", n, err)
		}
		e.wantStates(id, "a=success b=pending base=success")
		e.send()
		e.external("a", 9000, "success") // the webhook of the same pipeline
		check(e, id, 2)                  // depsd's failed one and the developer's 9000
	})
	t.Run("job retried in the unblocking pipeline", func(t *testing.T) {
		e, id := setup(t)
		e.external("a", 9000, "success")
		e.send()
		e.external("a", 9000, "running") // a job of pipeline 9000 is retried
		e.external("a", 9000, "success") // same pipeline id, a new delivery
		check(e, id, 1)
	})
}

// Finding 2: a create call must not outlive the outbox lease, or another
// worker may claim the action again and create a second pipeline (the
// gitlab client waits out 429s, so one call can take minutes). The worker
// gives its GitLab calls half the lease; a call cut off that way is
// retried later, and the retry looks for the pipeline before creating.
func TestReviewCreateStopsBeforeTheLeaseEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	slow := &slowCreateGitLab{fakeGitLab: e.gl}
	// Half the lease bounds the calls and also the recording of their
	// result: 2 s leaves a loaded CI machine's PostgreSQL time to record
	// (200 ms did not), and the slow create still waits 5 s.
	en, err := chain.New(chain.Config{Store: e.store, GitLab: slow, Graph: e.store.Graph, Now: e.clock.Now,
		Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	e.external("base", 50, "success") // a pending
	e.send()
	if !slow.cutOff.Load() {
		t.Fatal("the first create was not cut off at half the lease")
	}
	if n := e.count("a"); n != 0 {
		t.Fatalf("a has %d pipelines after a cut-off create", n)
	}
	e.clock.Advance(time.Hour) // past the backoff
	e.send()
	if n := e.count("a"); n != 1 {
		t.Errorf("a has %d pipelines, want 1", n)
	}
}

// slowCreateGitLab blocks its first CreatePipeline call until the caller
// gives up (or 5 s pass), as a call waiting out 429s would.
type slowCreateGitLab struct {
	*fakeGitLab
	calls  atomic.Int32
	cutOff atomic.Bool
}

func (s *slowCreateGitLab) CreatePipeline(ctx context.Context, projectID int64, ref string, vars gitlab.CreateOptions) (gitlab.Pipeline, error) {
	if s.calls.Add(1) == 1 {
		select {
		case <-ctx.Done():
			s.cutOff.Store(true)
			return gitlab.Pipeline{}, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	return s.fakeGitLab.CreatePipeline(ctx, projectID, ref, vars)
}

// Finding 4: a member that is Pending (its action in the outbox, no
// pipeline yet) when a merge adds a new in-chain upstream is only marked
// requeued: the outbox still sends its action, so its pipeline is created
// while that upstream has not succeeded (it has not even been built), and
// it is built a second time afterwards. ARCHITECTURE.md: "A member D is triggered
// when every upstream of D that is a member of the chain has succeeded" and
// "a project already pending in a running chain is not built a second time
// for a newer upstream change; it waits for both".
func TestReviewPendingMemberSentBeforeMergedUpstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "q>a")
	id := e.rebuild("a") // a pending, not sent yet
	if id2 := e.rebuild("q"); id2 != id {
		t.Fatalf("rebuild q went to chain %d, want %d", id2, id)
	}
	v := e.chain(id)
	if m := member(v, "a"); len(m.Upstreams) != 1 || m.Upstreams[0] != "q" {
		t.Fatalf("a upstreams = %v", m.Upstreams)
	}
	e.send()
	if n := e.count("a"); n != 0 {
		t.Errorf("a's pipeline created (%d) while its in-chain upstream q is %s", n, member(e.chain(id), "q").State)
	}
	e.finish("q", "success")
	for range 3 {
		e.send()
		for _, p := range e.gl.pipelinesSnapshot() {
			if p.Status == "created" {
				e.finishPipeline(e.pathOf(p.ProjectID), p, "success")
			}
		}
	}
	e.wantCounts(map[string]int{"q": 1, "a": 1})
}

// Finding 5: any success of a failed member's project unblocks it, even a
// pipeline older than the failed one (GitLab ids increase: 5 was created
// before depsd's 1002, so it was built from the old upstream image).
// The design: "A later successful pipeline of that member (a retry, a new
// pipeline) unblocks them". b is then built on an image of a that predates
// base's rebuild.
func TestReviewOlderPipelineSuccessUnblocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "failed")
	failed := member(e.chain(id), "a").PipelineID
	e.external("a", 5, "success") // started before base was rebuilt, ends now
	if 5 >= failed {
		t.Fatalf("test setup: failed pipeline %d", failed)
	}
	e.wantStates(id, "a=failed b=blocked base=success")
}

// Finding 6: child pipelines (source parent_pipeline) fire Pipeline Hooks on
// the default branch too, without depsd's variables (pipeline variables are
// not forwarded to children by default). Their success is taken as an
// untracked success of the project: with a parent that does not wait for
// its child (no strategy: depend), the child's success after the parent's
// requeues (or resets) everything downstream.
func TestReviewChildPipelineSuccessRebuildsDownstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "success") // the parent pipeline of a
	e.send()
	e.deliver(chain.PipelineEvent{ProjectID: e.ids["a"], Project: "a", PipelineID: 2000, Status: "success",
		Ref: "main", Source: "parent_pipeline", At: e.clock.Now()}) // its child
	e.finish("b", "success")
	e.send()
	if v := e.chain(id); v.State != chain.Finished {
		t.Errorf("chain %s (%s), want finished", v.State, states(v))
	}
	e.wantCounts(map[string]int{"a": 1, "b": 1})
}
