// Package verifytest fills a verification store as depsd serve would
// after many successful builds, for tests and benchmarks of what reads it
// (depsd freshness, the API, the dashboard's Freshness page).
package verifytest

import (
	"context"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

// Seed stores one verification of each project's image (host/PATH:latest,
// linux/amd64), verified a minute before now: the project of index i is
// stale when i%3 == 0, against an upstream of its own that moved i minutes
// before now (so the larger i, the staler), unknown when i%3 == 1 and
// fresh otherwise. Each upstream gets a history of two digests. It returns
// the stale projects, stalest first.
func Seed(ctx context.Context, st verify.Store, host string, projects []string, now time.Time) ([]string, error) {
	amd64 := deps.Platform{OS: "linux", Architecture: "amd64"}
	var stale []string
	for i, p := range projects {
		up := fmt.Sprintf("%s/base/runtime-%d:1", host, i%45)
		old, cur := fmt.Sprintf("sha256:%064x", 2*i), fmt.Sprintf("sha256:%064x", 2*i+1)
		res := verify.Result{Image: host + "/" + p + ":latest", Platform: amd64, Digest: fmt.Sprintf("sha256:%064x", 1_000_000+i)}
		switch i % 3 {
		case 0:
			up = fmt.Sprintf("%s/base/upstream-%d:1", host, i)
			res.State = verify.StateStale
			res.Detail = fmt.Sprintf("built on %s %s, not %s", up, old, cur)
			res.Upstreams = []verify.Verdict{{Upstream: up, State: verify.StateStale, By: verify.ByLayers, BuiltOn: old, Current: cur}}
			stale = append([]string{p}, stale...)
		case 1:
			res.State, res.Detail = verify.StateUnknown, "no annotation and no shared layer"
			res.Upstreams = []verify.Verdict{{Upstream: up, State: verify.StateUnknown, Reason: verify.ReasonNoBase, Current: cur}}
		default:
			res.State, res.Detail = verify.StateFresh, "built on the current image of every upstream"
			res.Upstreams = []verify.Verdict{{Upstream: up, State: verify.StateFresh, By: verify.ByAnnotation, BuiltOn: cur, Current: cur}}
		}
		for _, seen := range []struct {
			digest string
			at     time.Time
		}{{old, now.Add(-48 * time.Hour)}, {cur, now.Add(-time.Duration(i) * time.Minute)}} {
			if err := st.RecordUpstreamDigest(ctx, up, seen.digest, seen.at); err != nil {
				return nil, err
			}
		}
		if err := st.SaveVerification(ctx, verify.Record{Project: p, Result: res, VerifiedAt: now.Add(-time.Minute)}); err != nil {
			return nil, err
		}
	}
	return stale, nil
}
