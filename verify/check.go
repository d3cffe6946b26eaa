package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Checker verifies a project's published images after one of its
// pipelines succeeded, and records the outcome: each result, and every
// digest it read (the image's own: it is an upstream of its downstreams,
// which will be judged against it; and its upstreams' current ones). An
// upstream's current image is what the registry says now, never the newest
// digest recorded: a base outside the scope moves without depsd building
// it. The digests recorded for it before are its earlier images, which
// tell a stale image from an unknown one. It is safe for concurrent use.
type Checker struct {
	Verifier *Verifier
	Store    Store
	// Now stamps the records; nil: time.Now.
	Now func() time.Time
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Image verifies one image for one platform (bounded by the Verifier's
// timeout) and records the digests it read; it does not save the result.
// The error is the store's, joined; the result stands all the same.
func (c *Checker) Image(ctx context.Context, img Image, p deps.Platform) (Result, error) {
	req := Request{Image: img.Image, Platform: p}
	var errs []error
	for _, u := range img.Upstreams {
		up := Upstream{Image: u, Pin: img.Pins[u]} // Current empty: the Verifier resolves the tag
		history, err := c.Store.UpstreamHistory(ctx, u)
		errs = append(errs, err)
		for _, s := range history {
			up.Earlier = append(up.Earlier, s.Digest)
		}
		req.Upstreams = append(req.Upstreams, up)
	}
	res := c.Verifier.Verify(ctx, req)
	if ctx.Err() != nil {
		return res, errors.Join(errs...)
	}
	at := c.now()
	seen := map[string]string{img.Image: res.Digest}
	for _, v := range res.Upstreams {
		seen[v.Upstream] = v.Current
	}
	for image, digest := range seen {
		if digest != "" {
			errs = append(errs, c.Store.RecordUpstreamDigest(ctx, image, digest, at))
		}
	}
	return res, errors.Join(errs...)
}

// Check verifies each of images for each platform, one after the other,
// saves every result, and returns them. Only a store error is an error;
// ctx ending stops the check without saving what it could not verify.
func (c *Checker) Check(ctx context.Context, project string, images []Image, platforms []deps.Platform) ([]Record, error) {
	var out []Record
	for _, img := range images {
		for _, p := range platforms {
			res, err := c.Image(ctx, img, p)
			if ctx.Err() != nil {
				return out, fmt.Errorf("check %s: %w", project, context.Cause(ctx))
			}
			if err != nil {
				return out, fmt.Errorf("check %s: %w", project, err)
			}
			r := Record{Project: project, Result: res, VerifiedAt: c.now()}
			if err := c.Store.SaveVerification(ctx, r); err != nil {
				return out, fmt.Errorf("check %s: %w", project, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}
