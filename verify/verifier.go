package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"gitlab.com/depsd/depsd/deps"
)

// DefaultTimeout bounds one verification (an image, a platform, its
// upstreams) when Options.Timeout is zero: a slow registry delays what
// waits on the verdict by at most this, and the verdict is then unknown.
const DefaultTimeout = 30 * time.Second

// DefaultCacheEntries is how many reads the cache keeps when
// Options.CacheEntries is zero: each is a few hundred bytes (digests).
const DefaultCacheEntries = 4096

// maxEarlier is how many earlier images of an upstream are read when
// their layers are needed (newest first): each is read once and cached.
const maxEarlier = 8

// Options configure a Verifier.
type Options struct {
	// Timeout bounds each Verify call; 0: DefaultTimeout.
	Timeout time.Duration
	// CacheEntries bounds the cache of reads by digest; 0:
	// DefaultCacheEntries.
	CacheEntries int
}

// Verifier verifies images. It caches what it read by digest (content
// that cannot change), so an upstream's manifest and config are read once
// however many downstream images are verified against it; tags are
// resolved at each verification. It is safe for concurrent use, and
// concurrent reads of one digest share one request.
type Verifier struct {
	reg     Registry
	timeout time.Duration
	cache   *lru[string, any]
	flight  singleflight.Group
}

// New returns a Verifier reading through reg.
func New(reg Registry, o Options) *Verifier {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	return &Verifier{reg: reg, timeout: o.Timeout, cache: newLRU[string, any](o.CacheEntries)}
}

// Verify reads req.Image for req.Platform and judges it against each
// upstream (Decide). It costs at most three requests for the image (its
// tag, the platform's manifest, the config) and, the first time a digest
// is seen, as many for each upstream's current image; earlier images of an
// upstream are read (once each) only when the annotation and the current
// layers did not decide. The upstreams' current images are read while the
// image is (they do not depend on it): a verification waits for the
// longest of those reads, not their sum. Verify never fails: what cannot
// be read makes the verdict unknown with its reason. When ctx ends
// (shutdown) the verdicts say unreachable: the caller should not record
// them.
func (v *Verifier) Verify(ctx context.Context, req Request) Result {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	res := Result{Image: req.Image, Platform: req.Platform}
	currents := make([]readResult, len(req.Upstreams))
	var wg sync.WaitGroup
	for i, up := range req.Upstreams {
		wg.Go(func() { currents[i].r, currents[i].err = v.read(ctx, currentRef(up), req.Platform) })
	}
	img, err := v.read(ctx, req.Image, req.Platform)
	wg.Wait()
	if err != nil {
		reason, detail := v.classify(err)
		res.State, res.Reason, res.Detail = StateUnknown, reason, fmt.Sprintf("%s (%s): %s", req.Image, req.Platform, detail)
		for _, up := range req.Upstreams {
			res.Upstreams = append(res.Upstreams, Verdict{Upstream: up.Image, State: StateUnknown, Reason: reason, Current: up.Current, Detail: res.Detail})
		}
		return res
	}
	res.Digest, res.Manifest = img.Digest, img.Manifest
	for i, up := range req.Upstreams {
		res.Upstreams = append(res.Upstreams, v.judge(ctx, img, up, currents[i], req.Platform))
	}
	res.State, res.Detail = Sum(res.Upstreams)
	return res
}

// readResult is a read and its error.
type readResult struct {
	r   Read
	err error
}

// currentRef is what names up's current image: its tag, or the digest the
// caller gave as current.
func currentRef(up Upstream) string {
	if up.Current != "" {
		return pinned(up.Image, up.Current)
	}
	return up.Image
}

// judge decides against one upstream, given the read of its current image
// (currentRef), reading its earlier images when needed.
func (v *Verifier) judge(ctx context.Context, img Read, up Upstream, cur readResult, p deps.Platform) Verdict {
	if cur.err != nil {
		reason, detail := v.classify(cur.err)
		return Verdict{Upstream: up.Image, State: StateUnknown, Reason: reason, Current: up.Current,
			Detail: fmt.Sprintf("upstream %s: %s", currentRef(up), detail)}
	}
	current := cur.r
	earlier := make([]Read, 0, len(up.Earlier)+1)
	if up.Pin != "" && !current.names(up.Pin) {
		// The pin is an earlier image whether or not depsd recorded it.
		earlier = append(earlier, Read{Digest: up.Pin})
	}
	for _, d := range up.Earlier {
		if d != current.Digest && d != up.Pin {
			earlier = append(earlier, Read{Digest: d})
		}
	}
	verdict := pin(Decide(up.Image, img, current, earlier), up.Pin)
	if verdict.State != StateUnknown || len(earlier) == 0 || verdict.Reason == ReasonScratch {
		return verdict
	}
	// Neither the annotation nor the current layers decided: read the
	// earlier images (cached by digest) for their platform manifests and
	// layers.
	for i := range earlier[:min(len(earlier), maxEarlier)] {
		if r, err := v.read(ctx, pinned(up.Image, earlier[i].Digest), p); err == nil {
			earlier[i] = r
		}
	}
	return pin(Decide(up.Image, img, current, earlier), up.Pin)
}

// pin makes a stale verdict pinned when the image was built on the
// digest its Containerfile pins: a rebuild would build on it again.
func pin(v Verdict, digest string) Verdict {
	v.Pin = digest
	if digest != "" && v.State == StateStale && v.BuiltOn == digest {
		v.State = StatePinned
		v.Detail = fmt.Sprintf("built on %s %s, which its Containerfile pins by digest, not on its current image %s: the pin has to move", v.Upstream, short(digest), short(v.Current))
	}
	return v
}

// read reads ref for platform p: the manifest or index ref names (one
// request, skipped when ref is pinned by a digest already read), the
// platform's manifest from an index (one request, cached by digest) and
// the config (one request, cached by digest).
func (v *Verifier) read(ctx context.Context, ref string, p deps.Platform) (Read, error) {
	img, err := deps.NormalizeImage(ref)
	if err != nil {
		return Read{}, fmt.Errorf("%w: %v", errInvalid, err)
	}
	repo := img.Repository
	if img.Digest != "" {
		if r, ok := v.cache.get(readKey(img.Digest, p)); ok {
			return r.(Read), nil
		}
	}
	m, err := v.manifest(ctx, img)
	if err != nil {
		return Read{}, err
	}
	r, err := v.once(readKey(m.Digest, p), func() (any, error) { return v.readManifest(ctx, repo, m, p) })
	if err != nil {
		return Read{}, err
	}
	return r.(Read), nil
}

// manifest reads the manifest or index img names: at each call for a
// tag (it may have moved), once for a digest (the index of a
// multi-platform upstream serves every platform).
func (v *Verifier) manifest(ctx context.Context, img deps.ImageRef) (Manifest, error) {
	if img.Digest == "" {
		return v.reg.Manifest(ctx, img.Image)
	}
	m, err := v.once("b:"+img.Digest, func() (any, error) {
		m, err := v.reg.Manifest(ctx, img.Image)
		if err == nil && m.Digest != img.Digest {
			err = fmt.Errorf("%s answered with %s: %w", img.Image, m.Digest, errInvalid)
		}
		return m, err
	})
	if err != nil {
		return Manifest{}, err
	}
	return m.(Manifest), nil
}

func (v *Verifier) readManifest(ctx context.Context, repo string, m Manifest, p deps.Platform) (Read, error) {
	t, err := parseTop(m, p)
	if err != nil {
		return Read{}, err
	}
	r := Read{Digest: m.Digest, Manifest: m.Digest}
	im := t.image
	if im == nil {
		r.Manifest = t.platform
		got, err := v.once("m:"+t.platform, func() (any, error) {
			pm, err := v.reg.Manifest(ctx, repo+"@"+t.platform)
			if err != nil {
				return nil, err
			}
			return parseManifest(pm.Body)
		})
		if err != nil {
			return Read{}, err
		}
		m := got.(manifest)
		im = &m
	}
	r.BaseDigest, r.Annotated = baseAnnotation(im.annotations, t.annots)
	got, err := v.once("c:"+im.config, func() (any, error) {
		body, err := v.reg.Blob(ctx, repo, im.config)
		if err != nil {
			return nil, err
		}
		return parseConfig(body)
	})
	if err != nil {
		return Read{}, err
	}
	c := got.(config)
	if t.image != nil && !c.fits(p) {
		return Read{}, fmt.Errorf("%s is a single-platform image for %s: %w %s", m.Digest, c.platform, errNoPlatform, p)
	}
	r.DiffIDs = c.diffIDs
	return r, nil
}

// once returns the cached value of key, or computes it: concurrent
// callers share one computation, and only successes are cached.
func (v *Verifier) once(key string, read func() (any, error)) (any, error) {
	if x, ok := v.cache.get(key); ok {
		return x, nil
	}
	x, err, _ := v.flight.Do(key, func() (any, error) {
		x, err := read()
		if err == nil {
			v.cache.add(key, x)
		}
		return x, err
	})
	return x, err
}

func readKey(digest string, p deps.Platform) string { return "r:" + digest + "|" + p.String() }

// pinned names image's repository at digest.
func pinned(image, digest string) string {
	if img, err := deps.NormalizeImage(image); err == nil {
		return img.Repository + "@" + digest
	}
	if i := strings.LastIndexAny(image, ":@"); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image + "@" + digest
}

// classify turns a read's error into a reason and a sentence.
func (v *Verifier) classify(err error) (Reason, string) {
	switch {
	case errors.Is(err, ErrRefused):
		return ReasonRefused, err.Error()
	case errors.Is(err, ErrNotFound):
		return ReasonNotFound, fmt.Sprintf("not found: %v", err)
	case errors.Is(err, ErrUnauthorized):
		return ReasonUnauthorized, fmt.Sprintf("the registry refused depsd's credentials: %v", err)
	case errors.Is(err, errNoPlatform):
		return ReasonNoPlatform, err.Error()
	case errors.Is(err, errInvalid):
		return ReasonInvalid, err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonUnreachable, fmt.Sprintf("no answer within %s: %v", v.timeout, err)
	default:
		return ReasonUnreachable, fmt.Sprintf("registry unreachable: %v", err)
	}
}
