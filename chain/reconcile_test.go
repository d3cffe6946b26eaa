package chain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
)

// readsGitLab counts the pipelines the reconciler reads, and runs during
// the first read what happens while that read waits in the client's
// limiter (behind pipeline creations) in a busy rebuild.
type readsGitLab struct {
	*fakeGitLab
	mu     sync.Mutex
	reads  map[int64]int
	during func()
}

func (g *readsGitLab) GetPipeline(ctx context.Context, projectID, pipelineID int64) (gitlab.Pipeline, error) {
	g.mu.Lock()
	g.reads[pipelineID]++
	during := g.during
	g.during = nil
	g.mu.Unlock()
	if during != nil {
		during()
	}
	return g.fakeGitLab.GetPipeline(ctx, projectID, pipelineID)
}

// A reconcile round whose reads are slow (they wait behind pipeline
// creations) does not read a pipeline whose webhook came meanwhile: one
// that ended is done with, one that started running is read by the next
// round if it is still running then. A missed end is still caught.
func TestReconcilerSkipsPipelinesWhoseWebhookCameDuringTheRound(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"success", "running"} {
		t.Run(status, func(t *testing.T) {
			e := newEnv(t, chain.Full, "base>a", "base>b", "base>c")
			gl := &readsGitLab{fakeGitLab: e.gl, reads: map[int64]int{}}
			e.engine = e.newEngine(chain.Full, gl)
			id := e.rebuild("base")
			e.send()
			e.finish("base", "success")
			e.send()
			a, b, c := e.latest("a"), e.latest("b"), e.latest("c")
			// While the read of a waits, b's webhook arrives, and more
			// than the recheck interval passes. c's webhook is lost.
			gl.during = func() {
				e.finishPipeline("b", b, status)
				e.clock.Advance(2 * time.Second)
			}
			e.gl.setStatus(c.ID, "success")
			if _, err := e.engine.Reconcile(e.ctx); err != nil {
				t.Fatal(err)
			}
			if gl.reads[a.ID] != 1 || gl.reads[c.ID] != 1 {
				t.Errorf("reads of a %d, c %d; want 1 each", gl.reads[a.ID], gl.reads[c.ID])
			}
			if gl.reads[b.ID] != 0 {
				t.Errorf("b read %d times after its %s webhook came during the round", gl.reads[b.ID], status)
			}
			e.wantStates(id, "a=triggered b="+status+" base=success c=success")
			e.gl.setStatus(b.ID, "failed") // its end's webhook is lost
			if _, err := e.engine.Reconcile(e.ctx); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"success": "a=triggered b=success base=success c=success",
				"running": "a=triggered b=failed base=success c=success"}[status]
			e.wantStates(id, want)
		})
	}
}
