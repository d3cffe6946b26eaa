package gitlab

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeTimers is the limiter's clock in tests: time moves only in Advance,
// which runs the callbacks that fall due, so the order of grants is
// decided by the limiter alone.
type fakeTimers struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{now: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeTimers) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeTimers) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock by d and runs the callbacks due, in order.
func (c *fakeTimers) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}

// grants runs waiters against a limiter and records the order in which
// they were let through.
type grants struct {
	t        *testing.T
	l        *limiter
	ctx      context.Context
	mu       sync.Mutex
	order    []string
	started  int
	finished int
	wg       sync.WaitGroup
	cancel   map[string]context.CancelFunc
	done     map[string]chan struct{} // closed when the request's wait returned
}

func newGrants(t *testing.T, l *limiter) *grants {
	ctx, cancel := context.WithCancel(context.Background())
	g := &grants{t: t, l: l, ctx: ctx, cancel: map[string]context.CancelFunc{}, done: map[string]chan struct{}{}}
	t.Cleanup(func() { cancel(); g.wg.Wait() })
	return g
}

// queued returns how many urgent and normal requests wait.
func (l *limiter) queued() (urgent, normal int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.urgent), len(l.normal)
}

// start makes a request named name wait with priority p, and returns once
// it is queued or through, so that the arrival order is the call order.
func (g *grants) start(name string, p Priority) {
	g.t.Helper()
	ctx, cancel := context.WithCancel(g.ctx)
	g.cancel[name] = cancel
	done := make(chan struct{})
	g.done[name] = done
	g.mu.Lock()
	g.started++
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(done)
		err := g.l.wait(ctx, p)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.finished++
		if err == nil {
			g.order = append(g.order, name)
		}
	}()
	g.settle()
}

// settle waits until every request started is either queued in the
// limiter or has returned from wait, so that granted() is exact: the
// limiter changes nothing between the test's own calls.
func (g *grants) settle() {
	g.t.Helper()
	waitFor(g.t, func() bool {
		u, n := g.l.queued()
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.finished+u+n == g.started
	})
}

// granted returns the requests let through so far, in order.
func (g *grants) granted() []string {
	g.t.Helper()
	g.settle()
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

// grantedN returns the grants, failing unless there are n.
func (g *grants) grantedN(n int) []string {
	g.t.Helper()
	got := g.granted()
	if len(got) != n {
		g.t.Fatalf("granted %v, want %d grants", got, n)
	}
	return got
}

// held is how many requests hold a slot.
func (l *limiter) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// Urgent requests are let through ahead of normal ones that waited longer,
// in arrival order among themselves; normal ones follow when nothing
// urgent waits.
func TestLimiterLetsUrgentRequestsFirst(t *testing.T) {
	clk := newFakeTimers()
	l := newLimiter(100, 60, 1, clk.Now, clk.AfterFunc) // one token a second, no burst
	g := newGrants(t, l)
	g.start("first", PriorityNormal) // takes the token
	g.start("n1", PriorityNormal)
	g.start("n2", PriorityNormal)
	g.start("u1", PriorityUrgent)
	g.start("u2", PriorityUrgent)
	if got := g.grantedN(1); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("granted %v before any time passed, want [first]", got)
	}
	want := []string{"first", "u1", "u2", "n1", "n2"}
	for i := 2; i <= len(want); i++ {
		clk.Advance(time.Second)
		got := g.grantedN(i)
		if u, n := l.queued(); u+n != len(want)-i {
			t.Fatalf("after %d s: %d waiting, want %d (granted %v)", i-1, u+n, len(want)-i, got)
		}
		if !slices.Equal(got, want[:i]) {
			t.Fatalf("after %d s granted %v, want %v", i-1, got, want[:i])
		}
	}
	// u1 and u2 waited 1 s and 2 s; first none, n1 3 s, n2 4 s.
	if st := l.queueStats(PriorityUrgent); st != (QueueStats{Requests: 2, Waited: 3 * time.Second}) {
		t.Errorf("urgent queue stats %+v", st)
	}
	if st := l.queueStats(PriorityNormal); st != (QueueStats{Requests: 3, Waited: 7 * time.Second}) {
		t.Errorf("normal queue stats %+v", st)
	}
}

// While urgent requests wait, normal ones get no grant (every token goes
// to the creates of a chain that is due), until the first of them has
// waited maxNormalWait: a steady stream of urgent requests holds the
// background jobs up, never stops them.
func TestLimiterHoldsNormalRequestsWhileUrgentOnesWait(t *testing.T) {
	clk := newFakeTimers()
	l := newLimiter(100, 60, 1, clk.Now, clk.AfterFunc) // one token a second
	l.maxNormalWait = 10 * time.Second
	g := newGrants(t, l)
	g.start("first", PriorityNormal)
	g.start("n1", PriorityNormal)
	g.start("n2", PriorityNormal)
	const urgents = 30
	for i := range urgents {
		g.start(fmt.Sprintf("u%d", i), PriorityUrgent)
	}
	for i := 2; i <= 3+urgents; i++ {
		clk.Advance(time.Second)
		g.grantedN(i)
	}
	got := g.granted()[1:]
	var normals []int
	for i, name := range got {
		if name[0] == 'n' {
			normals = append(normals, i)
		}
	}
	// n1 and n2 began to wait at 0 s; the grants come one a second from
	// 1 s: the first nine are urgent, at 10 s n1 has waited 10 s and goes,
	// at 11 s n2 (waited 11 s), then the urgent ones again.
	if want := []int{9, 10}; !slices.Equal(normals, want) {
		t.Errorf("normal requests got grants %v of %v, want %v", normals, got, want)
	}
}

// Normal requests leave half the burst of tokens and one slot to urgent
// ones: a pipeline creation arriving while background reads saturate the
// client is sent at once.
func TestLimiterKeepsAReserveForUrgentRequests(t *testing.T) {
	clk := newFakeTimers()
	l := newLimiter(100, 60, 8, clk.Now, clk.AfterFunc)
	g := newGrants(t, l)
	for i := range 6 {
		g.start(fmt.Sprintf("n%d", i), PriorityNormal)
	}
	if got := g.grantedN(4); len(got) != 4 {
		t.Fatalf("normal requests took %d of 8 tokens, want 4 (the rest is the reserve)", len(got))
	}
	g.start("u", PriorityUrgent)
	if got := g.grantedN(5); got[4] != "u" {
		t.Fatalf("granted %v: the urgent request did not get a reserved token", got)
	}
	// One token a second from now on; each goes to the oldest normal
	// request only once the reserve is full again.
	clk.Advance(time.Second)
	if got := g.granted(); len(got) != 5 {
		t.Fatalf("granted %v after 1 s; a normal request ate into the reserve", got)
	}
	clk.Advance(time.Second)
	if got := g.grantedN(6); got[5] != "n4" {
		t.Fatalf("granted %v", got)
	}

	// Slots: of 2, a normal request leaves one to urgent ones.
	l2 := newLimiter(2, -1, 2, clk.Now, clk.AfterFunc)
	g2 := newGrants(t, l2)
	g2.start("n1", PriorityNormal)
	g2.start("n2", PriorityNormal)
	if got := g2.grantedN(1); len(got) != 1 || l2.held() != 1 {
		t.Fatalf("granted %v with 2 slots and no rate limit; want one normal request, one slot kept", got)
	}
	g2.start("u", PriorityUrgent)
	if got := g2.grantedN(2); got[1] != "u" {
		t.Fatalf("granted %v", got)
	}
	l2.release() // n1 done: u holds one slot, the other is the reserve
	g2.grantedN(2)
	l2.release() // u done
	if got := g2.grantedN(3); got[2] != "n2" {
		t.Fatalf("granted %v", got)
	}
}

// Whatever the mix of priorities, arrivals, cancellations and releases,
// the grants never exceed the bucket (burst + rate × time), and every
// request that stays is granted eventually.
func TestLimiterNeverExceedsTheRate(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			clk := newFakeTimers()
			const perMinute, burst = 120, 4 // 2 a second
			l := newLimiter(3, perMinute, burst, clk.Now, clk.AfterFunc)
			g := newGrants(t, l)
			var names []string
			canceled := map[string]bool{}
			for step := range 200 {
				switch r := rng.IntN(10); {
				case r < 4:
					name := fmt.Sprintf("r%d", step)
					names = append(names, name)
					g.start(name, Priority(rng.IntN(2)))
				case r < 5 && len(names) > 0:
					// Cancel a random request: one still queued leaves the
					// queue; one already through is unaffected.
					name := names[rng.IntN(len(names))]
					before := g.granted()
					g.cancel[name]()
					<-g.done[name]
					if !slices.Contains(before, name) {
						canceled[name] = true
					}
					if len(g.granted()) != len(before) {
						t.Fatalf("step %d: canceling %s let another request through", step, name)
					}
				case r < 8:
					if l.held() > 0 {
						l.release()
					}
				default:
					clk.Advance(time.Duration(rng.IntN(1000)) * time.Millisecond)
				}
				elapsed := clk.Now().Sub(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
				if n, limit := len(g.granted()), burst+int(elapsed.Seconds()*perMinute/60); n > limit {
					t.Fatalf("step %d: %d grants after %s, the bucket allows %d", step, n, elapsed, limit)
				}
			}
			for u, n := l.queued(); u+n > 0; u, n = l.queued() {
				for l.held() > 0 {
					l.release()
				}
				clk.Advance(time.Second)
			}
			if got := g.granted(); len(got) != len(names)-len(canceled) {
				t.Fatalf("%d granted of %d requests, %d canceled", len(got), len(names), len(canceled))
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// The priority travels with the context through client-go down to the
// transport: an urgent request queued after a normal one reaches GitLab
// first.
func TestTransportTakesThePriorityFromTheContext(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	clk := newFakeTimers()
	l := newLimiter(8, 60, 1, clk.Now, clk.AfterFunc)
	hc := &http.Client{Transport: &limitTransport{next: http.DefaultTransport, limits: l}}
	get := func(ctx context.Context, path string) {
		resp, err := hc.Do(must(http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)))
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	ctx := context.Background()
	get(ctx, "/first") // the one token
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); get(ctx, "/normal") }()
	waitFor(t, func() bool { _, n := l.queued(); return n == 1 })
	go func() { defer wg.Done(); get(WithPriority(ctx, PriorityUrgent), "/urgent") }()
	waitFor(t, func() bool { u, _ := l.queued(); return u == 1 })
	clk.Advance(time.Second)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
	clk.Advance(time.Second)
	wg.Wait()
	if want := []string{"/first", "/urgent", "/normal"}; !slices.Equal(seen, want) {
		t.Errorf("GitLab saw %v, want %v", seen, want)
	}
	if l.held() != 0 {
		t.Errorf("%d slots still held after every body was closed", l.held())
	}
}

// A limit GitLab announced with a 429 holds for GitLab's window, then the
// configured limit applies again: the throttle may have been one
// endpoint's, and holding its limit for good slowed every request (it did,
// before). A second 429 within the window sets its own announced limit and
// window; the configured limit is what comes back.
func TestLoweredLimitLapses(t *testing.T) {
	clk := newFakeTimers()
	l := newLimiter(8, 2000, 8, clk.Now, clk.AfterFunc)
	perMinute := func() float64 { return math.Round(l.perMinute()) }
	l.lowerFor(600, time.Minute)
	if got := perMinute(); got != 600 {
		t.Fatalf("after a 429 announcing 600/min: %v/min", got)
	}
	clk.Advance(30 * time.Second)
	l.lowerFor(900, time.Minute)
	if got := perMinute(); got != 900 {
		t.Fatalf("after a second 429 announcing 900/min: %v/min, want 900", got)
	}
	clk.Advance(59 * time.Second)
	if got := perMinute(); got != 900 {
		t.Fatalf("within the window: %v/min, want 900", got)
	}
	clk.Advance(time.Second)
	if got := perMinute(); got != 2000 {
		t.Errorf("after the window: %v/min, want the configured 2,000 back", got)
	}
	l.setPerMinute(1000)
	clk.Advance(time.Hour)
	if got := perMinute(); got != 1000 {
		t.Errorf("a configured change stays: %v/min", got)
	}
}

// While the caller holds them (the outbox has creates due that are not
// yet waiting), normal requests wait as they do behind urgent ones: not
// even the tokens nobody else wants go to them, until the hold ends or
// the first of them has waited maxNormalWait.
func TestLimiterHoldsNormalRequestsWhileHeld(t *testing.T) {
	clk := newFakeTimers()
	l := newLimiter(100, 60, 8, clk.Now, clk.AfterFunc) // one token a second, a burst of 8
	l.maxNormalWait = 10 * time.Second
	g := newGrants(t, l)
	l.hold(true)
	g.start("n1", PriorityNormal)
	g.start("n2", PriorityNormal)
	clk.Advance(5 * time.Second)
	g.grantedN(0) // tokens to spare, but held
	g.start("u1", PriorityUrgent)
	if got := g.grantedN(1); got[0] != "u1" {
		t.Fatalf("granted %v, want the urgent request first", got)
	}
	l.hold(false)
	// n1 and n2 go in one dispatch: the order their waits return in is
	// the scheduler's.
	if got := g.grantedN(3); !slices.Equal(got, []string{"u1", "n1", "n2"}) && !slices.Equal(got, []string{"u1", "n2", "n1"}) {
		t.Fatalf("granted %v after the hold ended, want u1 then n1 and n2", got)
	}

	// A hold that never ends still lets a normal request through once it
	// waited maxNormalWait.
	l.hold(true)
	g.start("n3", PriorityNormal)
	clk.Advance(9 * time.Second)
	g.grantedN(3)
	clk.Advance(time.Second)
	if got := g.grantedN(4); got[3] != "n3" {
		t.Fatalf("granted %v, want n3 after waiting 10 s", got)
	}
}
