package demo

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store"
)

// With a registry (Options.Registry), the sample's simulated pipelines
// push images, built as a build job would (the upstream's current image
// plus a layer of their own), and depsd serve verifies each member's
// images after it succeeds (images.verify: enforce): the live view and the
// final table gain the verdict. One member, infra/tools/scan, is told to
// build on the base's previous image, as a stale layer cache would: depsd
// finds it stale and rebuilds it without cache, and the rebuild is fresh.

// staleMember is the member the demo builds on a stale base.
const staleMember = "infra/tools/scan"

// sampleImages is what each sample project's pipelines push: the image
// its built stage is FROM (empty: none, its own layer alone), and whether
// the build writes the base annotations (as buildah and podman build do).
// apps/docs publishes no image.
func sampleImages(reg string) map[string]gitlabtest.Images {
	amd64 := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	ref := func(p string) string { return reg + "/" + p + ":latest" }
	return map[string]gitlabtest.Images{
		"infra/images/base": {Platforms: amd64},
		"infra/images/ruby": {From: ref("infra/images/base"), Annotate: true},
		"apps/shop":         {From: ref("infra/images/ruby")},
		"infra/tools/lint":  {From: ref("infra/images/base"), Annotate: true},
		"infra/tools/scan":  {From: ref("infra/images/base")},
		"infra/tools/ci":    {From: ref("infra/tools/lint"), Annotate: true},
	}
}

// prebuildBase builds the base once before depsd looks, records its
// image in the state as the previous generation (seen a day ago, as depsd
// serve would have when verifying it), and plans staleMember's next build
// on it.
func prebuildBase(ctx context.Context, srv *gitlabtest.Server, reg, state string) error {
	const base = "infra/images/base"
	id, err := srv.RunPipeline(base, "", "push")
	if err != nil {
		return err
	}
	if _, err := srv.WaitPipeline(ctx, id); err != nil {
		return err
	}
	var digest string
	for _, p := range srv.PublishedImages() {
		if p.Project == base && p.PipelineID == id {
			digest = p.Digest
		}
	}
	if digest == "" {
		return fmt.Errorf("the base's first build pushed nothing: %v", srv.PublishFailures())
	}
	st, err := store.Open(ctx, state)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.RecordUpstreamDigest(ctx, reg+"/"+base+":latest", digest, time.Now().Add(-24*time.Hour)); err != nil {
		return err
	}
	srv.PlanPublish(staleMember, gitlabtest.PublishPlan{From: digest})
	return nil
}
