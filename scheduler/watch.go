package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/chain"
)

// watched is an image whose tag is watched, and the projects a change
// rebuilds.
type watched struct {
	image    string
	projects []string
}

// watcher checks each watched tag's digest every interval and starts the
// rebuilds when it changes. Each check is claimed in the store (its next
// check time moves forward), so processes sharing a store split the work
// and a change is acted on once.
type watcher struct {
	explicit []watched
	external bool
	interval time.Duration
	s        *Scheduler
}

// checkTimeout bounds one registry request.
const checkTimeout = 30 * time.Second

// checkConcurrency bounds the registry requests in flight.
const checkConcurrency = 4

// firstRetry is the wait after a first failed check; it doubles with each
// further failure, up to the watch interval.
const firstRetry = time.Minute

// backoff returns the wait before the next check after `failures`
// consecutive failures.
func backoff(failures int, interval time.Duration) time.Duration {
	d := firstRetry
	for i := 1; i < failures && d < interval; i++ {
		d *= 2
	}
	return min(d, interval)
}

func (w *watcher) run(ctx context.Context) error {
	for {
		now := w.s.clock.Now()
		next := w.pass(ctx, now)
		timer, stop := w.s.clock.NewTimer(min(next.Sub(now), w.interval))
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-timer:
		}
	}
}

// pass checks the images that are due and returns when one is due next.
func (w *watcher) pass(ctx context.Context, now time.Time) time.Time {
	log := w.s.log
	targets, err := w.targets(ctx)
	if err != nil {
		// Without the users, a change would rebuild too little: wait.
		log.Error("cannot list watched images", "err", err)
		return now.Add(retryWait)
	}
	states, err := w.s.opts.Store.ImageStates(ctx)
	if err != nil {
		log.Error("cannot read image states", "err", err)
		return now.Add(retryWait)
	}
	byImage := make(map[string]ImageState, len(states))
	for _, st := range states {
		byImage[st.Image] = st
	}
	next := now.Add(w.interval)
	results := make(chan time.Time, len(targets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(checkConcurrency)
	for _, t := range targets {
		st, known := byImage[t.image]
		if known && st.NextCheck.After(now) {
			next = earliest(next, st.NextCheck)
			continue
		}
		ok, err := w.s.opts.Store.ClaimImageCheck(ctx, t.image, st.NextCheck, now.Add(w.interval))
		if err != nil {
			log.Error("cannot claim image check", "image", t.image, "err", err)
			next = earliest(next, now.Add(retryWait))
			continue
		}
		if !ok {
			continue // another process checks it
		}
		g.Go(func() error {
			results <- w.check(gctx, t, st, now)
			return nil
		})
	}
	g.Wait()
	close(results)
	for t := range results {
		next = earliest(next, t)
	}
	return next
}

// targets is the explicit watch list, each with the projects that use the
// image, plus (watch_external) every other external image in use.
func (w *watcher) targets(ctx context.Context) ([]watched, error) {
	var users []ImageUser
	if w.s.opts.Images != nil {
		var err error
		if users, err = w.s.opts.Images(ctx); err != nil {
			return nil, err
		}
	}
	byImage := make(map[string][]string, len(users))
	for _, u := range users {
		byImage[u.Image] = u.Projects
	}
	var out []watched
	for _, x := range w.explicit {
		ps := slices.Clone(x.projects)
		for _, p := range byImage[x.image] {
			if !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
		sort.Strings(ps)
		out = append(out, watched{image: x.image, projects: ps})
		delete(byImage, x.image)
	}
	if w.external {
		for _, u := range users {
			if _, ok := byImage[u.Image]; ok {
				out = append(out, watched{image: u.Image, projects: u.Projects})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].image < out[j].image })
	return out, nil
}

// check asks the registry for the tag's digest, records it, and starts
// the rebuilds on a change. It returns when the image is due again.
func (w *watcher) check(ctx context.Context, t watched, st ImageState, now time.Time) time.Time {
	log := w.s.log.With("image", t.image)
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	digest, err := w.s.opts.Resolver.Digest(cctx, t.image)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return now.Add(w.interval) // shutting down: not the registry's fault
		}
		failures := st.Failures + 1
		retry := now.Add(backoff(failures, w.interval))
		if rerr := w.s.opts.Store.RecordImageError(ctx, t.image, err.Error(), failures, now, retry); rerr != nil {
			log.Error("cannot record image check failure", "err", rerr)
		}
		log.Warn("image check failed", "err", err, "failures", failures, "retry_at", retry)
		w.s.observe(Fired{Kind: KindWatch, Target: t.image, Scheduled: now, Started: now, Duration: w.s.clock.Now().Sub(now), Err: err})
		return retry
	}
	prev, err := w.s.opts.Store.RecordDigest(ctx, t.image, digest, now)
	if err != nil {
		log.Error("cannot record image digest", "err", err)
		return now.Add(w.interval)
	}
	switch {
	case prev == "":
		log.Info("image digest recorded", "digest", digest)
	case prev == digest:
		log.Debug("image digest unchanged", "digest", digest)
		if st.Pending.Detail != "" {
			// An earlier change's rebuilds did not all start: some
			// failed, or the process that saw it stopped first.
			log.Info("starting the pending rebuilds of an earlier digest change", "change", st.Pending.Detail,
				"attempts", st.Pending.Attempts)
			w.startRebuilds(ctx, t.image, st.Pending, t.projects)
		}
	default:
		log.Info("image digest changed", "old", prev, "new", digest, "projects", len(t.projects))
		w.startRebuilds(ctx, t.image, PendingRebuild{Detail: DigestChange(t.image, prev, digest), At: now}, t.projects)
	}
	w.s.observe(Fired{Kind: KindWatch, Target: t.image, Scheduled: now, Started: now, Duration: w.s.clock.Now().Sub(now)})
	return now.Add(w.interval)
}

// startRebuilds starts a chain at each project using the image for a
// digest change recorded as pending (RecordDigest). The change stays
// pending until every project's chain started or the attempts run out, and
// each later check of the image tries again; chain.Engine.Rebuild starts a
// project's chain for one change once, so projects already started are not
// rebuilt twice. The outcome is recorded for `depsd schedules`.
func (w *watcher) startRebuilds(ctx context.Context, image string, change PendingRebuild, projects []string) {
	log := w.s.log.With("image", image)
	// Each Rebuild is one short transaction: run them all even if shutdown
	// begins, rather than leave users of the new image behind.
	ctx = context.WithoutCancel(ctx)
	reason := chain.Reason{Kind: chain.ReasonDigest, Detail: change.Detail, At: change.At}
	var done []string
	var errs []error
	for _, p := range projects {
		id, err := w.s.opts.Rebuilder.Rebuild(ctx, p, reason)
		if err != nil {
			log.Error("cannot start rebuild for new image digest", "project", p, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		log.Info("rebuild started for new image digest", "project", p, "chain_id", id)
		done = append(done, fmt.Sprintf("%s: chain %d", p, id))
	}
	finished := len(errs) == 0 || change.Attempts+1 >= rebuildAttempts
	outcome := strings.Join(done, ", ")
	if len(projects) == 0 {
		outcome = "no project uses it"
	}
	if err := errors.Join(errs...); err != nil {
		outcome = strings.TrimPrefix(outcome+"; errors: "+strings.ReplaceAll(err.Error(), "\n", "; "), "; ")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.s.opts.Store.RecordImageRebuild(rctx, image, change, outcome, finished); err != nil {
		log.Error("cannot record image rebuild outcome", "err", err)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
