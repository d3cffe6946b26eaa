package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
)

// outcomeLog is an Observer keeping the outcome of every applied event,
// in order.
type outcomeLog struct {
	mu       sync.Mutex
	outcomes []string
}

func (o *outcomeLog) EventApplied(_, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, outcome)
}
func (*outcomeLog) PipelineCreated(string, bool)          {}
func (*outcomeLog) ActionError(string, bool)              {}
func (*outcomeLog) ChainEnded(chain.State, time.Duration) {}
func (*outcomeLog) CommitStatus(string, string)           {}

func (o *outcomeLog) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.outcomes)
}

// publishes is a Verifier for which the projects it names publish
// images; nothing is verified (the queue is only compared).
type publishes map[string]bool

func (p publishes) Publishes(project string) bool { return p[project] }
func (publishes) Verify(context.Context, chain.VerifyRequest) chain.Verification {
	return chain.Verification{}
}

// noEffect are the outcomes of the full path for an event that changes
// nothing: what an event the cheap path settled may have had there.
var noEffect = []string{"no change", "no dependents", "ignored: pipeline already handled",
	"ignored: pipeline created by depsd", "ignored: project not in the graph"}

// cheapWorld is one of the two worlds FuzzCheapPathSameAsFull compares.
type cheapWorld struct {
	*env
	log *outcomeLog
}

func newCheapWorld(t *testing.T, edges []string, pub publishes, none []string, fullPath bool) *cheapWorld {
	e := newEnv(t, chain.Full, edges...)
	for _, p := range none {
		err := e.store.UpdateChains(e.ctx, func(tx chain.Tx) error {
			return tx.SetPipelineIdent(e.ctx, e.ids[p], chain.IdentNone)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	w := &cheapWorld{env: e, log: &outcomeLog{}}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now,
		Verifier: pub, Verify: chain.VerifyEnforce, Observer: w.log})
	if err != nil {
		t.Fatal(err)
	}
	if fullPath {
		chain.SetFullPathOnly(en)
	}
	e.engine = en
	return w
}

// record records evs without applying them.
func (w *cheapWorld) record(evs []chain.PipelineEvent) {
	w.t.Helper()
	for _, ev := range evs {
		w.keys++
		if _, err := w.engine.RecordEvent(w.ctx, fmt.Sprintf("key-%d", w.keys), chain.Event{Pipeline: &ev}); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *cheapWorld) process() {
	w.t.Helper()
	if _, err := w.engine.ProcessInbox(w.ctx); err != nil {
		w.t.Fatal(err)
	}
}

// pipelineName names a pipeline the same way in both worlds: depsd's by
// its project and rank among that project's created pipelines (their ids
// differ between the worlds: the outbox sends actions of one transaction
// in the order of their random ids), any other by its id.
func (w *cheapWorld) pipelineName(id int64) string {
	for _, p := range w.gl.pipelinesSnapshot() {
		if p.ID == id {
			for i, q := range w.gl.created(p.ProjectID) {
				if q.ID == id {
					return fmt.Sprintf("%s#%d", w.pathOf(p.ProjectID), i)
				}
			}
		}
	}
	return fmt.Sprint(id)
}

// state is what the comparison reads of a world: the chains (members'
// states, builds and pipelines), the pipelines depsd created per project
// in order with their status, and the verifications queued.
func (w *cheapWorld) state() string {
	w.t.Helper()
	cs, err := w.engine.Chains(w.ctx, chain.Filter{Limit: 1000})
	if err != nil {
		w.t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "chain %d %s roots %v:", c.ID, c.State, c.Roots)
		for _, m := range c.Members {
			fmt.Fprintf(&b, " %s=%s/%d/%s", m.Project, m.State, m.Builds, w.pipelineName(m.PipelineID))
			if m.Requeued {
				b.WriteString("+requeued")
			}
		}
		b.WriteString("\n")
	}
	names := make([]string, 0, len(w.ids))
	for p := range w.ids {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		for _, pl := range w.gl.created(w.ids[p]) {
			fmt.Fprintf(&b, "created %s %s %s\n", p, pl.Ref, pl.Status)
		}
	}
	var tasks int
	err = w.store.ViewChains(w.ctx, func(tx chain.Tx) error {
		var err error
		tasks, err = tx.CountVerifyTasks(w.ctx)
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	fmt.Fprintf(&b, "verifications queued %d\n", tasks)
	return b.String()
}

// FuzzCheapPathSameAsFull applies the same random stream of events to two
// worlds, one whose inbox takes the cheap path (cheap.go) and one that
// applies every event on the full path, and finds after every step the
// same chains, the same pipelines created for each project in the same
// order, the same verifications queued; each event the cheap path settled
// was one the full path applied to no effect, and every other event has
// the same outcome in both. The stream mixes what an instance sees:
// statuses of every kind from pipelines depsd did not create (of
// projects with and without dependents, some delivered twice, on the
// default branch and on others), depsd's own pipelines' statuses (in a
// project whose pipelines carry no action id too), rebuilds, sends, and
// events applied one at a time and several to a transaction.
func FuzzCheapPathSameAsFull(f *testing.F) {
	for seed := range uint64(16) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 40))
		n := 2 + r.IntN(6)
		edges := append(randomDAG(r, n), "leaf0", "leaf1")
		names := []string{"leaf0", "leaf1"}
		for i := range n {
			names = append(names, fmt.Sprintf("p%d", i))
		}
		pub := publishes{}
		for _, p := range names {
			if r.IntN(4) == 0 {
				pub[p] = true
			}
		}
		var none []string
		if r.IntN(2) == 0 {
			none = append(none, names[r.IntN(len(names))])
		}
		cheap := newCheapWorld(t, edges, pub, none, false)
		full := newCheapWorld(t, edges, pub, none, true)
		worlds := []*cheapWorld{cheap, full}
		statuses := []string{"created", "pending", "running", "success", "success", "failed", "canceled", "manual", "skipped"}
		var history []string
		for step := range 120 {
			var op string
			switch k := r.IntN(12); {
			case k == 0:
				p := names[r.IntN(len(names))]
				op = "rebuild " + p
				for _, w := range worlds {
					w.rebuild(p)
				}
			case k < 3:
				op = "send"
				for _, w := range worlds {
					w.send()
				}
			default:
				// A batch of events, recorded together, then applied.
				var batches [2][]chain.PipelineEvent
				for range 1 + r.IntN(4) {
					status := statuses[r.IntN(len(statuses))]
					ps := cheap.gl.pipelinesSnapshot()
					if len(ps) > 0 && r.IntN(2) == 0 {
						// One of depsd's pipelines: the same one in each world.
						pl := ps[r.IntN(len(ps))]
						path := cheap.pathOf(pl.ProjectID)
						rank := slices.IndexFunc(cheap.gl.created(pl.ProjectID), func(q fakePipeline) bool { return q.ID == pl.ID })
						op += fmt.Sprintf(" %s#%d:%s", path, rank, status)
						for i, w := range worlds {
							mine := w.gl.created(w.ids[path])[rank]
							w.gl.setStatus(mine.ID, status)
							batches[i] = append(batches[i], chain.PipelineEvent{ProjectID: mine.ProjectID, Project: path,
								PipelineID: mine.ID, Status: status, Ref: mine.Ref, Source: "api", Variables: mine.vars,
								URL: mine.WebURL, At: w.clock.Now()})
						}
						continue
					}
					p := names[r.IntN(len(names))]
					id := int64(1<<30 + r.IntN(12)) // some delivered more than once
					ref := "main"
					if r.IntN(8) == 0 {
						ref = "feature"
					}
					source := []string{"push", "web", "api", "schedule"}[r.IntN(4)]
					op += fmt.Sprintf(" %s/%d@%s:%s(%s)", p, id, ref, status, source)
					for i, w := range worlds {
						batches[i] = append(batches[i], chain.PipelineEvent{ProjectID: w.ids[p], Project: p, PipelineID: id,
							Status: status, Ref: ref, Source: source, At: w.clock.Now()})
					}
				}
				for i, w := range worlds {
					w.record(batches[i])
					w.process()
				}
			}
			history = append(history, op)
			for _, w := range worlds {
				w.clock.Advance(time.Second)
			}
			if c, f := cheap.state(), full.state(); c != f {
				t.Fatalf("step %d: the cheap path's world differs from the full path's\ncheap:\n%s\nfull:\n%s\nsteps:\n%s",
					step, c, f, strings.Join(history, "\n"))
			}
			co, fo := cheap.log.all(), full.log.all()
			if len(co) != len(fo) {
				t.Fatalf("step %d: %d events applied on the cheap path, %d on the full one", step, len(co), len(fo))
			}
			for i := range co {
				if strings.HasPrefix(co[i], "settled:") {
					if !slices.Contains(noEffect, fo[i]) {
						t.Fatalf("step %d: event %d settled on the cheap path (%s) but %q on the full one\nsteps:\n%s",
							step, i, co[i], fo[i], strings.Join(history, "\n"))
					}
				} else if co[i] != fo[i] {
					t.Fatalf("step %d: event %d: %q on the cheap path, %q on the full one\nsteps:\n%s",
						step, i, co[i], fo[i], strings.Join(history, "\n"))
				}
			}
		}
		if settled := slices.IndexFunc(cheap.log.all(), func(o string) bool { return strings.HasPrefix(o, "settled:") }); settled < 0 && seed == 0 {
			t.Errorf("no event took the cheap path")
		}
	})
}

// TestCheapPathSeesEveryNodeOfAProject: a rebuild of base's releases
// that runs on its default branch (rebuild: branch), in a project whose
// pipelines carry no action id, reports its success as a pipeline of
// base's default branch, a node with nothing downstream and in no chain:
// the member base@tags is that pipeline's (its action recorded the
// pipeline), so the event takes the full path and ruby is built next.
func TestCheapPathSeesEveryNodeOfAProject(t *testing.T) {
	e := newFleet(t, deps.RebuildBranch)
	err := e.store.UpdateChains(e.ctx, func(tx chain.Tx) error { return tx.SetPipelineIdent(e.ctx, 1, chain.IdentNone) })
	if err != nil {
		t.Fatal(err)
	}
	e.rebuild("infra/base@tags")
	e.send()
	p := e.latest("infra/base")
	if p.Ref != "main" || len(p.vars) != 0 {
		t.Fatalf("base's rebuild ran on %s with variables %v, want main and none", p.Ref, p.vars)
	}
	e.gl.setStatus(p.ID, "success")
	e.deliver(chain.PipelineEvent{ProjectID: 1, Project: "infra/base", PipelineID: p.ID, Status: "success",
		Ref: "main", Source: "api", URL: p.WebURL, At: e.clock.Now()})
	e.send()
	if n := e.count("lang/ruby"); n != 1 {
		t.Errorf("ruby built %d times after base's release rebuild succeeded, want 1", n)
	}
}

// TestCheapPathLeavesDepsdPipelinesToTheFullPath: a pipeline depsd
// created (it carries its action id) whose chain was canceled while its
// create was in flight is recorded on its action when its first webhook
// comes, though its project is in no active chain any more: an operator
// finds in the outbox every pipeline depsd created.
func TestCheapPathLeavesDepsdPipelinesToTheFullPath(t *testing.T) {
	e := newEnv(t, chain.Full, "base>a")
	id := e.rebuild("base")
	// GitLab creates the pipeline, but its answer is lost: the action
	// stays claimed, with no pipeline recorded.
	e.gl.createErr = func(int64) (error, bool) { return errors.New("connection reset"), true }
	e.send()
	e.gl.createErr = nil
	if err := e.engine.Cancel(e.ctx, id, "wrong base", ann); err != nil {
		t.Fatal(err)
	}
	p := e.latest("base")
	actionID := p.vars[chain.VarActionID]
	e.deliver(chain.PipelineEvent{ProjectID: p.ProjectID, Project: "base", PipelineID: p.ID, Status: "running",
		Ref: "main", Source: "api", Variables: p.vars, URL: p.WebURL, At: e.clock.Now()})
	var a chain.Action
	err := e.store.ViewChains(e.ctx, func(tx chain.Tx) error {
		var err error
		a, _, err = tx.Action(e.ctx, actionID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.PipelineID != p.ID {
		t.Errorf("action %s of the canceled chain records pipeline %d, want %d (state %s)", actionID, a.PipelineID, p.ID, a.State)
	}
}
