package scheduler

import (
	"context"
	"fmt"
	"time"
)

// Store keeps the state that makes fires happen once: per schedule, the
// scheduled time up to which fires are handled (the cursor), and per
// watched image, the digest last seen and when to check it next. The store
// package's *Store implements it on SQLite. Any number of Schedulers, in
// one process or several, may share a store: every claim is a
// compare-and-set that exactly one caller wins. Methods return errors with
// context.
type Store interface {
	// RegisterSchedule inserts s unless a row with s.ID exists, and
	// returns the stored row: the new one (whose Cursor is s.Cursor, the
	// registration time, so nothing before it is "missed"), or the one
	// a previous run or another process left.
	RegisterSchedule(ctx context.Context, s ScheduleState) (ScheduleState, error)
	// ScheduleStates returns every stored schedule.
	ScheduleStates(ctx context.Context) ([]ScheduleState, error)
	// ClaimFire moves the schedule's cursor from `from` to fire and
	// records that owner fired it at `at`, if the cursor is still at from.
	// ok is false when another caller moved it first: that caller fires.
	ClaimFire(ctx context.Context, id string, from, fire, at time.Time, owner string) (ok bool, err error)
	// ResumeFire takes over the fire at `fire`, claimed at firedAt and
	// never finished (its process stopped first), recording that owner
	// fires it again at `at`, if it still stands so; ok as for ClaimFire.
	ResumeFire(ctx context.Context, id string, fire, firedAt, at time.Time, owner string) (ok bool, err error)
	// SkipFires moves the cursor from `from` to `to` without firing (the
	// catch-up policy "skip"); ok as for ClaimFire.
	SkipFires(ctx context.Context, id string, from, to time.Time) (ok bool, err error)
	// RecordOutcome stores how the fire at `fire` ended, unless a later
	// fire has been claimed since.
	RecordOutcome(ctx context.Context, id string, fire time.Time, o Outcome) error

	// ImageStates returns every image ever checked.
	ImageStates(ctx context.Context) ([]ImageState, error)
	// ClaimImageCheck moves the image's next check from due (zero: the
	// image has no row yet) to next, if it is still at due; ok is false
	// when another caller claimed the check.
	ClaimImageCheck(ctx context.Context, image string, due, next time.Time) (ok bool, err error)
	// RecordDigest stores the digest seen at `at` and clears the error
	// count, and returns the digest stored before ("" on the first
	// observation). The read and the write are one transaction, so of
	// several callers recording the same change exactly one sees it. A
	// change is recorded as pending in the same transaction (Pending:
	// DigestChange, at `at`, no attempt yet), so its rebuilds survive the
	// caller.
	RecordDigest(ctx context.Context, image, digest string, at time.Time) (previous string, err error)
	// RecordImageError stores a failed check: the message, the number of
	// consecutive failures, and when to check again.
	RecordImageError(ctx context.Context, image, msg string, failures int, at, next time.Time) error
	// RecordImageRebuild stores the outcome of an attempt at a digest
	// change's rebuilds, and whether they are done (all started, or given
	// up): the change stays pending otherwise, with one more attempt
	// counted. A newer change recorded meanwhile stays pending.
	RecordImageRebuild(ctx context.Context, image string, change PendingRebuild, outcome string, done bool) error
}

// ScheduleState is one schedule as stored.
type ScheduleState struct {
	ID       string // stable identity: hash of kind, target, spec, timezone
	Kind     Kind
	Target   string // project path or job name
	Spec     string
	Timezone string
	// Cursor is the scheduled time up to which fires are handled (fired,
	// or skipped by policy); the next fire is Next(Cursor).
	Cursor time.Time
	// LastFire is the scheduled time of the last fire; zero if never.
	LastFire time.Time
	FiredAt  time.Time // wall time the last fire was claimed
	FiredBy  string    // owner that claimed it
	Outcome  Outcome   // of the last fire; zero FinishedAt while running
	// LastSuccess is when a fire last finished without error.
	LastSuccess time.Time
}

// Outcome is how one fire ended.
type Outcome struct {
	FinishedAt time.Time
	Duration   time.Duration
	ChainID    int64  // rebuilds: the chain holding the request
	Err        string // empty on success
}

// ImageState is one watched image as stored.
type ImageState struct {
	Image     string // repository:tag, normalised
	Digest    string // last seen; empty before the first successful check
	CheckedAt time.Time
	NextCheck time.Time
	ChangedAt time.Time // when Digest was first seen
	Failures  int       // consecutive failed checks
	Err       string    // of the last failed check; cleared by a success
	ErrAt     time.Time
	// RebuildAt and RebuildOutcome describe the rebuilds the last digest
	// change started ("chain 12", or the errors).
	RebuildAt      time.Time
	RebuildOutcome string
	// Pending is the last change whose rebuilds have not all started;
	// zero Detail when there is none.
	Pending PendingRebuild
}

// PendingRebuild is a digest change whose rebuilds have not all started:
// the reason's detail and time (the same for every user, so a rebuild
// started twice is one chain) and the attempts made.
type PendingRebuild struct {
	Detail   string
	At       time.Time
	Attempts int
}

// DigestChange is the detail of a digest change's rebuild reason.
func DigestChange(image, prev, digest string) string {
	return fmt.Sprintf("%s %s→%s", image, prev, digest)
}
