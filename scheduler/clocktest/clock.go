// Package clocktest is a manual clock for tests of code that takes a
// scheduler.Clock: time moves only when the test calls Advance or Set, and
// timers fire then, so tests never sleep.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a fake clock. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	timers []*timer
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// New returns a clock reading now.
func New(now time.Time) *Clock {
	c := &Clock{now: now}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches now+d.
func (c *Clock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	c.cond.Broadcast()
	return t.c, func() bool { return c.stop(t) }
}

func (c *Clock) stop(t *timer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.cond.Broadcast()
			return true
		}
	}
	return false
}

// Advance moves the clock forward by d and fires the timers due.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires the timers due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	kept := c.timers[:0]
	for _, x := range c.timers {
		if x.at.After(c.now) {
			kept = append(kept, x)
			continue
		}
		x.c <- c.now
	}
	c.timers = kept
	c.cond.Broadcast()
}

// WaitTimers blocks until n timers are pending: the code under test has
// reached the point where it waits for time to pass.
func (c *Clock) WaitTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}

// Pending returns the number of timers waiting to fire.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
