package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// wait bounds how long a test waits for something that should happen at
// once; it is never slept, only selected on.
const wait = 10 * time.Second

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func storePath(t *testing.T) string { return storetest.State(t) }

func TestMain(m *testing.M) { storetest.Main(m) }

// rebuild is one call of the fake Rebuilder.
type rebuild struct {
	Project string
	Reason  chain.Reason
}

// rebuilder is a fake chain engine: it records the calls and hands out
// chain ids. Calls also arrive on C, for tests that wait for one.
type rebuilder struct {
	mu    sync.Mutex
	calls []rebuild
	next  int64
	fail  map[string]error
	C     chan rebuild
}

func newRebuilder() *rebuilder { return &rebuilder{C: make(chan rebuild, 100), next: 100} }

func (r *rebuilder) Rebuild(_ context.Context, project string, reason chain.Reason) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, rebuild{project, reason})
	r.C <- rebuild{project, reason}
	if err := r.fail[project]; err != nil {
		return 0, err
	}
	r.next++
	return r.next, nil
}

func (r *rebuilder) Calls() []rebuild {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rebuild(nil), r.calls...)
}

func (r *rebuilder) waitCall(t *testing.T) rebuild {
	t.Helper()
	select {
	case c := <-r.C:
		return c
	case <-time.After(wait):
		t.Fatal("no rebuild was started")
		return rebuild{}
	}
}

// running is a Scheduler whose Run goroutine the test stops.
type running struct {
	*scheduler.Scheduler
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start runs s until the test stops it (or ends).
func start(t *testing.T, s *scheduler.Scheduler) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{Scheduler: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Run and waits for it, fires in flight included.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after its context ended")
		}
	})
}

func newScheduler(t *testing.T, o scheduler.Options) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scheduleState(t *testing.T, st *store.Store, target string) scheduler.ScheduleState {
	t.Helper()
	all, err := st.ScheduleStates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Target == target {
			return s
		}
	}
	t.Fatalf("no stored schedule for %s in %v", target, all)
	return scheduler.ScheduleState{}
}

func at(day, hour, minute int) time.Time {
	return time.Date(2025, 1, day, hour, minute, 0, 0, time.UTC)
}
