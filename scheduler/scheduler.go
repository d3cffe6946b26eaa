package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Resolver asks an image's registry which manifest digest a tag points at
// now; registry.Client implements it. It is called from several goroutines
// at once. An error means the registry could not be asked or did not
// answer (the check is retried with backoff); it must not carry secrets.
type Resolver interface {
	Digest(ctx context.Context, image string) (string, error)
}

// Options are what a Scheduler is built from.
type Options struct {
	Config Config
	// InScope reports whether a project path is in the configured scope;
	// nil accepts every path.
	InScope func(project string) bool
	Store   Store // required
	// Rebuilder starts chains; Run requires it when schedules or watches
	// exist. List does not need it.
	Rebuilder Rebuilder
	// Images lists external images and their users; needed for
	// watch_external, and to know whom a change in a `watch:` image
	// rebuilds.
	Images ImageUsers
	// Resolver asks registries for digests; Run requires it when images
	// are watched. List does not need it.
	Resolver Resolver
	Clock    Clock        // nil: the system clock
	Logger   *slog.Logger // nil: discard
	// Owner names this process in the store's record of who fired what;
	// empty: host name and pid.
	Owner string
	// Observe, if set, is called after every fire and every image check
	// (from the goroutine that ran it): the daemon exports metrics from it.
	Observe func(Fired)
}

// Fired describes one finished fire or image check, for metrics.
type Fired struct {
	Kind      Kind
	Target    string    // project, job name, or image
	Scheduled time.Time // the scheduled time (the check time for watches)
	Started   time.Time
	Duration  time.Duration
	ChainID   int64 // rebuilds
	Err       error
}

// Scheduler fires rebuild schedules and jobs, and watches images. Build it
// with New, add jobs with AddJob, then call Run once.
type Scheduler struct {
	opts    Options
	log     *slog.Logger
	clock   Clock
	catchUp CatchUp
	owner   string

	mu      sync.Mutex // guards entries and started
	entries []*entry
	started bool

	watch *watcher // nil when nothing is watched
}

// retryWait is how soon a schedule is looked at again after the store
// failed; the store is local, so failures are brief (a busy lock).
const retryWait = 30 * time.Second

// maxWait caps how long the loops sleep, so that a suspended machine or a
// changed wall clock is noticed within a minute.
const maxWait = time.Minute

// misfireGrace is how late a fire may run and still count as on time
// rather than missed (which the catch-up policy decides about).
const misfireGrace = time.Minute

// New checks the configuration (the same errors as Config.Validate) and
// builds a Scheduler. It does no I/O. A Scheduler built only to List (the
// `depsd schedules` command) needs just the Store, and Images when images
// are watched.
func New(o Options) (*Scheduler, error) {
	entries, images, err := o.Config.compile(o.InScope)
	if err != nil {
		return nil, err
	}
	if o.Store == nil {
		return nil, errors.New("scheduler: no store")
	}
	watching := len(images) > 0 || o.Config.WatchExternal
	s := &Scheduler{opts: o, log: o.Logger, clock: o.Clock, catchUp: o.Config.catchUp(), owner: o.Owner, entries: entries}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "scheduler")
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.owner == "" {
		host, _ := os.Hostname()
		s.owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if watching {
		s.watch = &watcher{
			explicit: images,
			external: o.Config.WatchExternal,
			interval: o.Config.watchInterval(),
			s:        s,
		}
	}
	return s, nil
}

// AddJob adds a maintenance job, fired like the rebuild schedules (once per
// scheduled time across processes sharing the store) with the same catch-up
// policy. spec is a cron spec as in the configuration, or "off" to list
// the job as disabled. fn gets a context that ends when Run's does; its
// error (or panic) is recorded as the fire's outcome. Jobs must be added
// before Run; names must be unique.
func (s *Scheduler) AddJob(name, cronSpec string, fn func(context.Context) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("job %s: added after Run", name)
	}
	if name == "" || fn == nil {
		return errors.New("job: empty name or nil function")
	}
	for _, e := range s.entries {
		if e.kind == KindJob && e.target == name {
			return fmt.Errorf("job %s: added twice", name)
		}
	}
	if cronSpec == RescanOff {
		s.entries = append(s.entries, &entry{kind: KindJob, target: name, spec: spec{text: RescanOff}, off: true})
		return nil
	}
	sp, err := parseSpec(cronSpec, "")
	if err != nil {
		return fmt.Errorf("job %s: %w", name, err)
	}
	s.entries = append(s.entries, newEntry(KindJob, name, sp, fn))
	return nil
}

// Run fires schedules and checks images until ctx ends, then waits for the
// fires in flight (they see ctx end) and returns nil. Store and registry
// failures are logged, recorded where possible, and retried; they never
// end Run. Run may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("scheduler: Run called twice")
	}
	s.started = true
	rebuilds := s.watch != nil
	for _, e := range s.entries {
		rebuilds = rebuilds || e.kind == KindRebuild
	}
	if rebuilds && s.opts.Rebuilder == nil {
		s.mu.Unlock()
		return errors.New("scheduler: schedules or watches are configured but no rebuilder was given")
	}
	if s.watch != nil && s.opts.Resolver == nil {
		s.mu.Unlock()
		return errors.New("scheduler: images are watched but no registry resolver was given")
	}
	var active []*entry
	for _, e := range s.entries {
		if !e.off {
			active = append(active, e)
		}
	}
	s.mu.Unlock()

	var g errgroup.Group
	if len(active) > 0 {
		g.Go(func() error { return s.runSchedules(ctx, active) })
	}
	if s.watch != nil {
		g.Go(func() error { return s.watch.run(ctx) })
	}
	return g.Wait()
}

func (s *Scheduler) observe(f Fired) {
	if s.opts.Observe != nil {
		s.opts.Observe(f)
	}
}
