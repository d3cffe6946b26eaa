package scheduler

import "time"

// Clock is the scheduler's source of time. Production uses the system
// clock; tests inject clocktest.Clock and advance it, so no test sleeps.
type Clock interface {
	Now() time.Time
	// NewTimer returns a channel that receives once d has passed on this
	// clock, and a function that stops the timer (reporting whether it
	// was still pending).
	NewTimer(d time.Duration) (c <-chan time.Time, stop func() bool)
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
