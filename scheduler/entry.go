package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Kind says what a schedule starts.
type Kind string

// The kinds of schedules.
const (
	KindRebuild Kind = "rebuild" // a chain rebuild of a project
	KindJob     Kind = "job"     // a maintenance job such as the rescan
	KindWatch   Kind = "watch"   // a digest check of an external image
)

// entry is one cron schedule the loop drives.
type entry struct {
	id     string
	kind   Kind
	target string // project or job name
	spec   spec
	off    bool // a job disabled with "off": listed, never fired
	job    func(context.Context) error

	// Owned by the schedule loop.
	cursor time.Time
	loaded bool
	busy   bool // a fire is running
}

func newEntry(kind Kind, target string, sp spec, job func(context.Context) error) *entry {
	return &entry{id: scheduleID(kind, target, sp.text, sp.tz), kind: kind, target: target, spec: sp, job: job}
}

// scheduleID is the stable identity under which a schedule's state is
// stored. It covers everything that defines when and what the schedule
// fires: a schedule whose cron or timezone changes is a new schedule (it
// starts counting from the change and does not catch up on the old one).
func scheduleID(kind Kind, target, spec, tz string) string {
	h := sha256.New()
	for _, s := range []string{string(kind), target, spec, tz} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}
