package demo

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
)

// With a registry (Options.Registry), the sample's simulated pipelines
// push images, built as a build job would (the upstream's current image
// plus a layer of their own), and the demo reads each image back after
// its member succeeds, as depsd serve does after a success (verify's
// Checker): the live view and the final table gain the verdict. One
// member, infra/tools/scan, is told to build on the base's previous
// image, as a stale layer cache would: it is shown stale.

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

// imageChecker verifies the sample's images in the demo's state.
type imageChecker struct {
	reg     string // the registry's host:port
	srv     *gitlabtest.Server
	st      *store.Store
	checker *verify.Checker
	images  map[string]gitlabtest.Images
}

func newImageChecker(ctx context.Context, srv *gitlabtest.Server, reg, state string) (*imageChecker, error) {
	st, err := store.Open(ctx, state)
	if err != nil {
		return nil, err
	}
	client := registry.New(registry.Options{Insecure: []string{reg}, UserAgent: "depsd demo"})
	return &imageChecker{reg: reg, srv: srv, st: st, images: sampleImages(reg),
		checker: &verify.Checker{Verifier: verify.New(client, verify.Options{}), Store: st}}, nil
}

func (c *imageChecker) Close() error { return c.st.Close() }

// prebuild builds the base once before depsd looks (its image as the
// previous generation, seen a day ago) and plans staleMember's next
// build on it.
func (c *imageChecker) prebuild(ctx context.Context) error {
	const base = "infra/images/base"
	id, err := c.srv.RunPipeline(base, "", "push")
	if err != nil {
		return err
	}
	if _, err := c.srv.WaitPipeline(ctx, id); err != nil {
		return err
	}
	digest := c.pushed(base, id)
	if digest == "" {
		return fmt.Errorf("the base's first build pushed nothing: %v", c.srv.PublishFailures())
	}
	if err := c.st.RecordUpstreamDigest(ctx, c.reg+"/"+base+":latest", digest, time.Now().Add(-24*time.Hour)); err != nil {
		return err
	}
	c.srv.PlanPublish(staleMember, gitlabtest.PublishPlan{From: digest})
	return nil
}

// pushed is the digest pipeline id of project pushed; "" when none.
func (c *imageChecker) pushed(project string, id int64) string {
	for _, p := range c.srv.PublishedImages() {
		if p.Project == project && p.PipelineID == id {
			return p.Digest
		}
	}
	return ""
}

// check verifies project's image after pipeline id succeeded; ok is false
// for a project whose image has no upstream to judge against (the base:
// its digest is recorded, for its downstreams) or that publishes none.
func (c *imageChecker) check(ctx context.Context, project string, id int64) (r verify.Record, ok bool, err error) {
	im, publishes := c.images[project]
	if !publishes {
		return r, false, nil
	}
	if im.From == "" {
		if d := c.pushed(project, id); d != "" {
			err = c.st.RecordUpstreamDigest(ctx, c.reg+"/"+project+":latest", d, time.Now())
		}
		return r, false, err
	}
	recs, err := c.checker.Check(ctx, project, []verify.Image{{Image: c.reg + "/" + project + ":latest", Upstreams: []string{im.From}}},
		[]deps.Platform{{OS: "linux", Architecture: "amd64"}})
	if err != nil || len(recs) == 0 {
		return r, false, err
	}
	return recs[0], true, nil
}

// verdict says a verification in the live view's words.
func verdict(r verify.Record) string {
	s := "images " + string(r.Result.State)
	if r.Result.State != verify.StateFresh {
		s += ": " + r.Result.Detail
	}
	return s
}
