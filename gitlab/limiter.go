package gitlab

import (
	"context"
	"math"
	"sync"
	"time"
)

// Priority orders the requests waiting for the client's limits (requests
// in flight and requests a minute). Set it on a call's context with
// WithPriority; see the package doc.
type Priority int

const (
	// PriorityNormal is the priority of every request whose context names
	// none: scans, hook checks, the reconciler, the catch-up.
	PriorityNormal Priority = iota
	// PriorityUrgent is for requests that move a chain forward (a pipeline
	// creation and the look-up before it): they pass the limits ahead of
	// normal requests and find a reserve kept for them.
	PriorityUrgent
)

// String names the priority for logs.
func (p Priority) String() string {
	if p == PriorityUrgent {
		return "urgent"
	}
	return "normal"
}

type priorityKey struct{}

// WithPriority returns a context whose GitLab requests, made by any method
// of any Client, wait for the client's limits with priority p. The
// priority is a property of the work the caller does, so it travels with
// the context through every call (and retry) the work makes.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the priority WithPriority set on ctx, PriorityNormal
// if none; fakes of the client use it to check what callers mark urgent.
func PriorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}

// normalMaxWait: while urgent requests wait, normal ones wait too —
// every request a rebuild's creates could use goes to them, so that a
// chain that is due takes no longer than its creates at the rate limit —
// but no normal request waits longer than this: a steady stream of
// pipeline creations holds the background jobs up (a 10,000-project
// rebuild takes 5 minutes at the default rate) but never stops them.
const normalMaxWait = 10 * time.Minute

// limiter is the client's admission control: a request may be sent when a
// slot is free (at most slots in flight) and the token bucket (perSecond,
// up to burst) holds a token. Waiting requests are admitted in priority
// order, first come first served within a priority. Normal requests leave
// a reserve to urgent ones — half the burst of tokens and one slot — so
// that a pipeline creation arriving while background work saturates the
// limits is sent at once instead of waiting for the next token; all
// requests draw from the one bucket, so the rate is never exceeded.
//
// Waiters are granted by dispatch, which runs on every arrival, release,
// cancellation, rate change and at the time the next token is due (one
// timer, armed only while a waiter lacks a token).
type limiter struct {
	now       func() time.Time
	afterFunc func(d time.Duration, f func()) (stop func() bool)

	mu           sync.Mutex
	perSecond    float64 // tokens a second; +Inf: no rate limit
	configured   float64 // perSecond as configured, restored at restoreAt
	restoreAt    time.Time
	burst        float64
	tokens       float64
	last         time.Time // when tokens was brought up to date
	tokenReserve float64   // tokens normal requests leave to urgent ones
	slots        int
	slotReserve  int // slots normal requests leave to urgent ones
	inFlight     int

	urgent, normal []*waiter // first come first
	// holding: the caller has urgent work due that is not yet waiting
	// here (HoldNormal); normal requests wait as they do behind urgent
	// ones.
	holding bool
	// maxNormalWait: a normal request that waited this long goes before
	// urgent ones (normalMaxWait; tests shorten it).
	maxNormalWait time.Duration
	timerStop     func() bool // the armed timer; nil when none
	timerGen      int
	stats         [2]QueueStats // by Priority
}

type waiter struct {
	ready   chan struct{} // closed when granted
	granted bool
	prio    Priority
	since   time.Time // when it began to wait
}

// QueueStats says how long requests of one priority waited for the
// client's limits (requests in flight and the rate), from the first
// request on.
type QueueStats struct {
	Requests int64         // requests let through
	Waited   time.Duration // their waits, summed
}

// queueStats returns the stats of priority p.
func (l *limiter) queueStats(p Priority) QueueStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats[p.index()]
}

func (p Priority) index() int {
	if p == PriorityUrgent {
		return 1
	}
	return 0
}

// newLimiter returns a limiter allowing slots requests in flight and
// perMinute requests a minute with bursts of burst (perMinute <= 0: no
// rate limit). now and afterFunc are the clock (time.Now and
// time.AfterFunc in production).
func newLimiter(slots, perMinute, burst int, now func() time.Time, afterFunc func(time.Duration, func()) func() bool) *limiter {
	slots, burst = max(slots, 1), max(burst, 1)
	l := &limiter{
		now: now, afterFunc: afterFunc,
		perSecond: math.Inf(1), burst: float64(burst), tokens: float64(burst), last: now(),
		tokenReserve: float64(burst / 2), slots: slots, maxNormalWait: normalMaxWait,
	}
	if perMinute > 0 {
		l.perSecond = float64(perMinute) / 60
	}
	if slots > 1 {
		l.slotReserve = 1
	}
	return l
}

func realAfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// limited reports whether the limiter has a rate limit.
func (l *limiter) limited() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !math.IsInf(l.perSecond, 1)
}

// perMinute returns the rate limit in requests a minute (+Inf: none).
func (l *limiter) perMinute() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	return l.perSecond * 60
}

// setPerMinute changes the rate limit; tokens earned so far are kept.
func (l *limiter) setPerMinute(perMinute float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	l.perSecond = perMinute / 60
	l.configured, l.restoreAt = l.perSecond, time.Time{}
	l.dispatch()
}

// lowerFor lowers the rate limit to perMinute for d, after which the
// configured limit applies again. GitLab announces the limit of the
// throttle a 429 came from, which may be one endpoint's (pipeline
// creations, a project's file reads) rather than the whole API's: held for
// good, it would slow everything to that endpoint's pace.
func (l *limiter) lowerFor(perMinute float64, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill()
	if l.restoreAt.IsZero() {
		l.configured = l.perSecond
	}
	l.perSecond = min(l.configured, perMinute/60)
	l.restoreAt = l.now().Add(d)
	l.dispatch()
}

// wait returns when the request may be sent (it then holds a slot until
// release) or with ctx's error when ctx ends first.
func (l *limiter) wait(ctx context.Context, p Priority) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &waiter{ready: make(chan struct{}), prio: p}
	l.mu.Lock()
	w.since = l.now()
	if p == PriorityUrgent {
		l.urgent = append(l.urgent, w)
	} else {
		l.normal = append(l.normal, w)
	}
	l.dispatch()
	l.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// Granted while ctx ended: nothing is sent, so the slot and the
		// token go back.
		l.inFlight--
		l.tokens = min(l.burst, l.tokens+1)
		l.stats[w.prio.index()].Requests--
	} else {
		l.urgent = remove(l.urgent, w)
		l.normal = remove(l.normal, w)
	}
	l.dispatch()
	return ctx.Err()
}

// hold makes normal requests wait (held) or lets them go again, as if
// urgent requests were waiting, with the same bound (maxNormalWait).
func (l *limiter) hold(held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holding == held {
		return
	}
	l.holding = held
	l.dispatch()
}

// release frees the slot of a request that is done.
func (l *limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	l.dispatch()
}

func remove(q []*waiter, w *waiter) []*waiter {
	for i, x := range q {
		if x == w {
			return append(q[:i], q[i+1:]...)
		}
	}
	return q
}

// refill brings the bucket up to now, and the configured rate back once
// a lowering lapsed. l.mu is held.
func (l *limiter) refill() {
	now := l.now()
	if !l.restoreAt.IsZero() && !now.Before(l.restoreAt) {
		l.perSecond, l.restoreAt = l.configured, time.Time{}
	}
	if math.IsInf(l.perSecond, 1) {
		l.tokens = l.burst
		return
	}
	if d := now.Sub(l.last); d > 0 {
		l.tokens = min(l.burst, l.tokens+d.Seconds()*l.perSecond)
		l.last = now
	}
}

// dispatch grants what the slots and tokens allow, in priority order, and
// arms the timer for when the next waiter's token is due. l.mu is held.
func (l *limiter) dispatch() {
	l.refill()
	for {
		w, wake := l.next()
		if w == nil {
			l.arm(wake)
			return
		}
		w.granted = true
		l.inFlight++
		l.tokens--
		st := &l.stats[w.prio.index()]
		st.Requests++
		st.Waited += l.now().Sub(w.since)
		close(w.ready)
	}
}

// next takes the waiter to grant now off its queue, or returns nil and how
// long until a token for the first waiter is due (0: nothing to wait for
// but a slot, or nobody waits). l.mu is held.
func (l *limiter) next() (*waiter, time.Duration) {
	urgent, normal := len(l.urgent) > 0, len(l.normal) > 0
	if !urgent && !normal {
		return nil, 0
	}
	overdue := time.Duration(0) // how long until normal[0] has waited maxNormalWait
	if normal {
		overdue = l.maxNormalWait - l.now().Sub(l.normal[0].since)
	}
	normalsTurn := normal && (!(urgent || l.holding) || overdue <= 0)
	if !urgent && !normalsTurn {
		// Held, with nothing urgent waiting yet: normal requests wait
		// for the urgent ones to come and go, at most maxNormalWait.
		return nil, overdue
	}
	slots, tokens := l.slots, 1.0
	if normalsTurn && !urgent {
		// Nothing urgent waits: keep the reserve for what may come.
		slots, tokens = l.slots-l.slotReserve, 1+l.tokenReserve
	}
	if l.inFlight >= slots {
		return nil, 0
	}
	if l.tokens < tokens && !math.IsInf(l.perSecond, 1) {
		return nil, l.until(tokens)
	}
	if normalsTurn {
		w := l.normal[0]
		l.normal = l.normal[1:]
		return w, 0
	}
	w := l.urgent[0]
	l.urgent = l.urgent[1:]
	return w, 0
}

// until is how long until the bucket holds n tokens. l.mu is held.
func (l *limiter) until(n float64) time.Duration {
	return max(time.Nanosecond, time.Duration(math.Ceil((n-l.tokens)/l.perSecond*float64(time.Second))))
}

// arm sets the timer to dispatch again after d (0: no timer needed).
// l.mu is held.
func (l *limiter) arm(d time.Duration) {
	if l.timerStop != nil {
		l.timerStop()
		l.timerStop = nil
	}
	if d <= 0 {
		return
	}
	l.timerGen++
	gen := l.timerGen
	l.timerStop = l.afterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if gen == l.timerGen {
			l.timerStop = nil
		}
		l.dispatch()
	})
}
