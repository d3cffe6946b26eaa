package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Checker verifies a project's published images after one of its
// pipelines succeeded, against what the store recorded of their
// upstreams, and records the outcome: each result, and each image's
// digest as the newest in its history (the image is an upstream of its
// downstreams, which will be judged against it). It is what the chain
// engine and the daemon call; it is safe for concurrent use.
type Checker struct {
	Verifier *Verifier
	Store    Store
	// Now stamps the records; nil: time.Now.
	Now func() time.Time
}

// Check verifies each of images for each platform, one after the other
// (each bounded by the Verifier's timeout), saves every result, and
// returns them. An upstream with no recorded history is resolved by its
// tag and its digest recorded, so it has one from then on. Only a store
// error is an error; ctx ending stops the check without saving what it
// could not verify.
func (c *Checker) Check(ctx context.Context, project string, images []Image, platforms []deps.Platform) ([]Record, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	var out []Record
	for _, img := range images {
		ups := make([]Upstream, 0, len(img.Upstreams))
		for _, u := range img.Upstreams {
			h, err := c.Store.UpstreamHistory(ctx, u)
			if err != nil {
				return out, fmt.Errorf("check %s: %w", project, err)
			}
			ups = append(ups, UpstreamOf(u, h))
		}
		for _, p := range platforms {
			res := c.Verifier.Verify(ctx, Request{Image: img.Image, Platform: p, Upstreams: ups})
			if ctx.Err() != nil {
				return out, fmt.Errorf("check %s: %w", project, context.Cause(ctx))
			}
			at := now()
			r := Record{Project: project, Result: res, VerifiedAt: at}
			if err := c.Store.SaveVerification(ctx, r); err != nil {
				return out, fmt.Errorf("check %s: %w", project, err)
			}
			var errs []error
			if res.Digest != "" {
				errs = append(errs, c.Store.RecordUpstreamDigest(ctx, img.Image, res.Digest, at))
			}
			for i, v := range res.Upstreams {
				if ups[i].Current == "" && v.Current != "" {
					errs = append(errs, c.Store.RecordUpstreamDigest(ctx, v.Upstream, v.Current, at))
				}
			}
			if err := errors.Join(errs...); err != nil {
				return out, fmt.Errorf("check %s: %w", project, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}
