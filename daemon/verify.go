package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
)

// imageVerifier is the chain engine's Verifier: it reads every image a
// project publishes (verify.Published over the stored projects, renewed
// with each graph), for each configured platform, judges it against its
// upstreams' current images and the digests depsd saw them have, stores
// each result and every digest it read (the project's own image is an
// upstream of others), and sums the results up for the engine.
type imageVerifier struct {
	checker   *verify.Checker
	st        verify.Store
	rules     verify.PublishRules
	platforms []deps.Platform
	now       func() time.Time
	log       *slog.Logger
	// observe counts each image's result (metrics); nil: none.
	observe func(verify.State)
	// reg reads tags' digests for seenPublications; seen records them, and
	// seenChanged is told when one changed the map (a rescan is due).
	reg         verify.Registry
	seen        func(ctx context.Context, image, node string, pipelineID int64, at time.Time) (bool, error)
	seenChanged func()

	published atomic.Pointer[map[string][]verify.Image]
}

// maxImagesAtOnce bounds the images (and platforms) of one project read
// at once.
const maxImagesAtOnce = 4

// projectsChanged renews what each project publishes from the projects
// of a scan, as the store keeps them for verification
// (store.VerifyProjects: each judged against its built stage's bases,
// recorded by the scan).
func (iv *imageVerifier) projectsChanged(projects []verify.Project) {
	published, errs := verify.Published(projects, iv.rules)
	for _, err := range errs {
		iv.log.Warn("published image left out", "err", err)
	}
	iv.published.Store(&published)
}

func (iv *imageVerifier) images(project string) []verify.Image {
	if m := iv.published.Load(); m != nil {
		return (*m)[project]
	}
	return nil
}

// Publishes implements chain.Verifier.
func (iv *imageVerifier) Publishes(project string) bool { return len(iv.images(project)) > 0 }

// Verify implements chain.Verifier: every image and platform, up to
// maxImagesAtOnce at once, each bounded by the verify.Verifier's timeout.
// Results are stored unless ctx was canceled (shutdown: what could not be
// read then says nothing about the image).
func (iv *imageVerifier) Verify(ctx context.Context, req chain.VerifyRequest) chain.Verification {
	type job struct {
		img verify.Image
		p   deps.Platform
	}
	var jobs []job
	for _, img := range iv.images(req.Project) {
		for _, p := range iv.platforms {
			jobs = append(jobs, job{img, p})
		}
	}
	results := make([]verify.Result, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxImagesAtOnce)
	for i, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = iv.verifyImage(ctx, j.img, j.p)
		})
	}
	wg.Wait()
	if errors.Is(ctx.Err(), context.Canceled) {
		return chain.Verification{State: chain.ImageUnknown, Detail: "not verified: stopped"}
	}
	at := iv.now()
	for _, r := range results {
		if iv.observe != nil {
			iv.observe(r.State)
		}
		if err := iv.st.SaveVerification(context.WithoutCancel(ctx), verify.Record{Project: req.Project, Result: r, VerifiedAt: at}); err != nil {
			iv.log.Warn("store verification failed", "project", req.Project, "image", r.Image, "err", err)
		}
	}
	iv.seenPublications(ctx, req, results, at)
	v := summary(results)
	// What a downstream's pins of these images move to.
	for _, r := range results {
		if r.Digest == "" {
			continue
		}
		if v.Images == nil {
			v.Images = map[string]string{}
		}
		v.Images[r.Image] = r.Digest
	}
	return v
}

// seenPublications records which tags downstreams name, of the project's
// repositories, the build of req pushed: those another node of the
// project is taken to publish (no template of `refs:` claims them) whose
// digest is now one this build pushed. The next scan then maps them to
// req's node (deps.EdgeSeen). One manifest read per such tag; nothing for
// a project with a single node.
func (iv *imageVerifier) seenPublications(ctx context.Context, req chain.VerifyRequest, results []verify.Result, at time.Time) {
	if iv.reg == nil || iv.seen == nil {
		return
	}
	pushed := map[string]bool{}
	for _, r := range results {
		if r.Digest != "" {
			pushed[r.Digest] = true
		}
	}
	m := iv.published.Load()
	if m == nil || len(pushed) == 0 {
		return
	}
	project := deps.NodeProject(req.Project)
	changed := false
	for node, images := range *m {
		if node == req.Project || deps.NodeProject(node) != project {
			continue
		}
		for _, img := range images {
			if img.Declared {
				continue // a template's: configured, not seen
			}
			man, err := iv.reg.Manifest(ctx, img.Image)
			if err != nil || !pushed[man.Digest] {
				continue
			}
			ch, err := iv.seen(context.WithoutCancel(ctx), img.Image, req.Project, req.PipelineID, at)
			if err != nil {
				iv.log.Warn("record seen publication failed", "image", img.Image, "project", req.Project, "err", err)
				continue
			}
			if ch {
				iv.log.Info("image seen published by another ref", "image", img.Image, "project", req.Project, "pipeline_id", req.PipelineID)
			}
			changed = changed || ch
		}
	}
	if changed && iv.seenChanged != nil {
		iv.seenChanged()
	}
}

// verifyImage verifies one image for one platform and records the digests
// it read (verify.Checker.Image: the upstreams as the registry has them
// now, with every digest depsd saw them have).
func (iv *imageVerifier) verifyImage(ctx context.Context, img verify.Image, p deps.Platform) verify.Result {
	res, err := iv.checker.Image(ctx, img, p)
	if err != nil {
		iv.log.Warn("record image digests failed", "image", img.Image, "err", err)
	}
	return res
}

// summary is the engine's verdict on a build from its images' results:
// stale when one is (saying which and where), else pinned when one is,
// fresh when all are, unknown otherwise.
func summary(results []verify.Result) chain.Verification {
	if len(results) == 0 {
		return chain.Verification{State: chain.ImageUnknown, Detail: "no image to verify"}
	}
	for _, r := range results {
		if r.State == verify.StateStale {
			return chain.Verification{State: chain.ImageStale, Detail: fmt.Sprintf("%s, in %s (%s)", r.Detail, r.Image, r.Platform)}
		}
	}
	for _, r := range results {
		if r.State == verify.StatePinned {
			return chain.Verification{State: chain.ImagePinned, Detail: fmt.Sprintf("%s, in %s (%s)", r.Detail, r.Image, r.Platform)}
		}
	}
	for _, r := range results {
		switch {
		case r.State == verify.StateFresh:
		case r.Reason != "": // the image itself could not be read: Detail names it
			return chain.Verification{State: chain.ImageUnknown, Detail: r.Detail}
		default:
			return chain.Verification{State: chain.ImageUnknown, Detail: fmt.Sprintf("%s (%s): %s", r.Image, r.Platform, r.Detail)}
		}
	}
	return chain.Verification{State: chain.ImageFresh, Detail: "every image built on its upstreams' current images"}
}

// newImageVerifier builds the engine's Verifier from images.* in
// depsd.yaml, and has the graph's reloads renew what projects publish. It
// returns nil (a nil chain.Verifier) under images.verify: off.
func (d *Daemon) newImageVerifier() (chain.Verifier, error) {
	cfg := d.opts.Config
	if cfg.Images.Verify == config.VerifyOff {
		return nil, nil
	}
	platforms, err := deps.ParsePlatforms(cfg.Platform)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	reg := registry.New(d.registryOptions())
	iv := &imageVerifier{
		checker: &verify.Checker{Verifier: verify.New(reg, verify.Options{Timeout: cfg.Images.Timeout}), Store: d.store, Now: d.opts.Now},
		st:      d.store, rules: cfg.PublishRules(), platforms: platforms, now: d.opts.Now,
		log:     d.log.With("component", "verify"),
		observe: func(s verify.State) { d.metrics.verifications.WithLabelValues(string(s)).Inc() },
		reg:     reg, seen: d.store.RecordSeen, seenChanged: d.requestRescan,
	}
	d.state.projectsChanged = iv.projectsChanged
	return iv, nil
}

// verifyTimeout bounds one build's verification in the engine: its images
// are read a few at once, each within images.timeout, so a build whose
// images all wait for a slow registry takes about that once; the margin
// covers the store's reads and writes.
func verifyTimeout(perImage time.Duration) time.Duration {
	if perImage <= 0 {
		perImage = verify.DefaultTimeout
	}
	return perImage + 5*time.Second
}

// freshnessInterval is how often the staleness gauges are refreshed from
// the store (every replica exports them: whichever Prometheus scrapes
// sees the same).
const freshnessInterval = 30 * time.Second

// exportFreshness refreshes depsd_image_stale and
// depsd_image_stale_seconds from the stored verifications until ctx ends.
func (d *Daemon) exportFreshness(ctx context.Context) error {
	tick := time.NewTicker(freshnessInterval)
	defer tick.Stop()
	for {
		if rows, err := freshnessRows(ctx, d.store); err == nil {
			d.metrics.observeFreshness(rows, d.opts.Now())
		} else if ctx.Err() == nil {
			d.log.Warn("read verifications for the metrics failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// freshnessRows are the stored verifications as `depsd freshness` shows
// them (Freshness, without what fixes them: the gauges do not say).
func freshnessRows(ctx context.Context, st *store.Store) ([]verify.Row, error) {
	rep, err := Freshness(ctx, FreshnessSources{Store: st}, FreshnessQuery{})
	return rep.Images, err
}
