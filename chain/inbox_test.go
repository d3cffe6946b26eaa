package chain_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// outcomes records what the engine reports per applied event.
type outcomes struct {
	mu  sync.Mutex
	got []string
}

func (o *outcomes) EventApplied(kind, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, outcome)
}
func (o *outcomes) PipelineCreated(string, bool)          {}
func (o *outcomes) ActionError(string, bool)              {}
func (o *outcomes) ChainEnded(chain.State, time.Duration) {}
func (o *outcomes) CommitStatus(string, string)           {}

// TestInboxAppliesABacklogAsOneByOne: a backlog of events recorded before
// the processor runs (which it applies several to a transaction) has the
// effects the same events have one by one: a success that two hooks deliver
// under two keys starts its chain once, and the second delivery sees the
// chain the first started.
func TestInboxAppliesABacklogAsOneByOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "lib>b")
	obs := &outcomes{}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	key := 0
	record := func(project string, pipeline int64, status string) {
		key++
		ev := chain.PipelineEvent{ProjectID: e.ids[project], Project: project, PipelineID: pipeline, Status: status, Ref: "main", Source: "push"}
		if _, err := en.RecordEvent(e.ctx, fmt.Sprintf("k%d", key), chain.Event{Pipeline: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	record("a", 5, "running")
	record("base", 77, "running")
	record("base", 77, "success")
	record("base", 77, "success") // a second hook of the project
	record("b", 6, "running")
	record("lib", 90, "success")
	record("lib", 90, "success")
	record("a", 5, "success")
	if n, err := en.ProcessInbox(e.ctx); n != key || err != nil {
		t.Fatalf("ProcessInbox = %d, %v; want %d", n, err, key)
	}
	started := 0
	for _, o := range obs.got {
		if o == "started chain" {
			started++
		}
	}
	if started != 2 || !slices.Contains(obs.got, "ignored: pipeline already handled") {
		t.Errorf("outcomes %q: want 2 chains started and the repeated successes ignored", obs.got)
	}
	cs, err := en.Chains(e.ctx, chain.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s (%d reasons)", states(c), len(c.Reasons)))
	}
	slices.Sort(got)
	want := []string{"a=pending base=success (1 reasons)", "b=pending lib=success (1 reasons)"}
	if !slices.Equal(got, want) {
		t.Errorf("chains %q, want %q", got, want)
	}
}

// TestRescansForPushesKeepTheirGap: a push that comes less than RescanGap
// after the last rescan for pushes waits for the gap, and the pushes
// recorded meanwhile share its rescan.
func TestRescansForPushesKeepTheirGap(t *testing.T) {
	e := newEnv(t, chain.Full, "a>b", "c")
	const gap = time.Second
	type rescan struct {
		projects   []string
		start, end time.Time
	}
	var rescans []rescan
	recordPush := func(project string) {
		e.keys++
		ev := chain.PushEvent{ProjectID: e.ids[project], Project: project, Ref: "main", Changed: []string{"Containerfile"}, At: e.clock.Now()}
		if _, err := e.engine.RecordEvent(e.ctx, fmt.Sprintf("push-%d", e.keys), chain.Event{Push: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now, RescanGap: gap,
		Rescan: func(_ context.Context, projects []string) error {
			rescans = append(rescans, rescan{projects: projects, start: time.Now()})
			rescans[len(rescans)-1].end = time.Now()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	recordPush("a")
	if _, err := e.engine.ProcessInbox(e.ctx); err != nil {
		t.Fatal(err)
	}
	recordPush("b")
	done := make(chan error, 1)
	go func() { _, err := e.engine.ProcessInbox(e.ctx); done <- err }()
	recordPush("c") // while the inbox waits for the gap
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(rescans) != 2 || !slices.Equal(rescans[1].projects, []string{"b", "c"}) {
		t.Fatalf("rescans %+v, want one of a, then one of b and c", rescans)
	}
	if waited := rescans[1].start.Sub(rescans[0].end); waited < gap {
		t.Errorf("the second rescan started %v after the first ended, want at least %v", waited, gap)
	}
}

// TestPushesRecordedBeforeARescanShareIt: pushes of dependency files
// recorded before the inbox reaches the first call one rescan of all
// their projects, which reads GitLab as it is then (every push delivered
// before is in it); a push recorded while that rescan runs calls another,
// of its project. The pipeline events between them are applied as
// before.
func TestPushesRecordedBeforeARescanShareIt(t *testing.T) {
	e := newEnv(t, chain.Full, "a>b", "c")
	var rescans [][]string
	recordPush := func(project string) {
		e.keys++
		ev := chain.PushEvent{ProjectID: e.ids[project], Project: project, Ref: "main", Changed: []string{"Containerfile"}, At: e.clock.Now()}
		if _, err := e.engine.RecordEvent(e.ctx, fmt.Sprintf("push-%d", e.keys), chain.Event{Push: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now,
		Rescan: func(_ context.Context, projects []string) error {
			rescans = append(rescans, projects)
			if len(rescans) == 1 {
				recordPush("c") // delivered while the first rescan runs
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	recordPush("a")
	e.keys++
	ok := chain.PipelineEvent{ProjectID: e.ids["a"], Project: "a", PipelineID: 7, Status: "success", Ref: "main", Source: "push", At: e.clock.Now()}
	if _, err := e.engine.RecordEvent(e.ctx, "ok", chain.Event{Pipeline: &ok}); err != nil {
		t.Fatal(err)
	}
	recordPush("b")
	recordPush("c")
	n, err := e.engine.ProcessInbox(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("applied %d events, want 5", n)
	}
	if want := [][]string{{"a", "b", "c"}, {"c"}}; !slices.EqualFunc(rescans, want, slices.Equal) {
		t.Errorf("rescans of %v, want %v (one for the three pushes recorded before it, one for the push recorded meanwhile)", rescans, want)
	}
	e.send()
	if e.count("b") != 1 {
		t.Errorf("b built %d times after a's success, want 1", e.count("b"))
	}
}
