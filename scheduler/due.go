package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"
)

// maxDueSteps bounds the walk over missed fire times, so that a
// once-a-minute schedule after months of downtime costs milliseconds. A
// walk cut short resumes at the next pass.
const maxDueSteps = 200_000

// latestDue returns the last fire time of s after cursor and not after
// now, and how many fire times lie in (cursor, now]; n is 0 when none is
// due.
func latestDue(s cron.Schedule, cursor, now time.Time) (last time.Time, n int) {
	next := s.Next(cursor)
	if next.IsZero() || next.After(now) {
		return time.Time{}, 0
	}
	if d, ok := s.(cron.ConstantDelaySchedule); ok {
		k := int(now.Sub(next) / d.Delay)
		return next.Add(time.Duration(k) * d.Delay), k + 1
	}
	for n = 1; n < maxDueSteps; n++ {
		after := s.Next(next)
		if after.IsZero() || after.After(now) {
			break
		}
		next = after
	}
	return next, n
}
