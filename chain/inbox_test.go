package chain_test

import (
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
