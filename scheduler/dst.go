package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"
)

// dstSchedule gives cron specs the daylight-saving behaviour of Vixie cron
// and cronie, which operators expect, where robfig/cron differs:
//
//   - spring forward: a fixed-time job whose time does not exist that day
//     (02:30 in Europe/Zurich on the last Sunday of March) fires when the
//     clocks jump (03:00) instead of being skipped for the day;
//   - fall back: a fixed-time job whose time happens twice (02:30 on the
//     last Sunday of October) fires once, at the first occurrence, instead
//     of twice.
//
// Jobs whose hour field is '*' keep cron's behaviour: "30 * * * *" fires
// every real hour, both 02:30s included.
type dstSchedule struct{ *cron.SpecSchedule }

// allHours is the Hour mask of '*' (star bit aside).
const allHours = 1<<24 - 1

// Next returns the next fire time after t.
func (d dstSchedule) Next(t time.Time) time.Time {
	next := d.SpecSchedule.Next(t)
	if d.Hour&allHours == allHours || next.IsZero() {
		return next
	}
	if jump, ok := d.skippedFire(t, next); ok {
		return jump
	}
	for range 4 { // at most one repeat per transition; a bound for safety
		if !repeatedWallTime(next.In(d.Location)) {
			break
		}
		next = d.SpecSchedule.Next(next)
	}
	return next
}

// skippedFire looks for a forward transition in (from, next] whose
// vanished wall-clock hour the schedule matches; the fire then happens at
// the transition.
func (d dstSchedule) skippedFire(from, next time.Time) (time.Time, bool) {
	_, offFrom := from.In(d.Location).Zone()
	_, offNext := next.In(d.Location).Zone()
	if offNext <= offFrom {
		return time.Time{}, false
	}
	// Find the transition: the first second whose offset is offNext.
	lo, hi := from, next // offset(lo) = offFrom, offset(hi) = offNext
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if _, off := mid.In(d.Location).Zone(); off == offFrom {
			lo = mid
		} else {
			hi = mid
		}
	}
	jump := hi
	// In the zone of before the jump, the vanished wall times are the
	// instants [jump, jump+gap).
	before := *d.SpecSchedule
	before.Location = time.FixedZone("", offFrom)
	gap := time.Duration(offNext-offFrom) * time.Second
	if c := before.Next(jump.Add(-time.Second)); !c.Before(jump) && c.Before(jump.Add(gap)) && jump.After(from) && jump.Before(next) {
		return jump, true
	}
	return time.Time{}, false
}

// repeatedWallTime reports whether t's wall-clock time (in t's location)
// already happened earlier, just before clocks went back.
func repeatedWallTime(t time.Time) bool {
	_, off := t.Zone()
	_, offBefore := t.Add(-3 * time.Hour).Zone()
	if offBefore <= off {
		return false
	}
	earlier := t.Add(-time.Duration(offBefore-off) * time.Second)
	y1, m1, d1 := earlier.Date()
	y2, m2, d2 := t.Date()
	return y1 == y2 && m1 == m2 && d1 == d2 && earlier.Hour() == t.Hour() && earlier.Minute() == t.Minute()
}
