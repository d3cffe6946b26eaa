package scan_test

import (
	"context"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
)

// TestFirstScanReadsOnlyWhatCounts: one tree listing per project, then
// only the first Containerfile name present and .gitlab-deps, each
// distinct content once (blob ids are content hashes), all from one tree.
func TestFirstScanReadsOnlyWhatCounts(t *testing.T) {
	same := "FROM registry.example.com/g/base\n"
	c := newClocked(t,
		gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n", "Dockerfile": "FROM alpine\n"}},
		gitlabtest.Project{Path: "g/a", Files: map[string]string{"Containerfile": same, ".gitlab-deps": "g/b\n"}},
		gitlabtest.Project{Path: "g/b", Files: map[string]string{"Containerfile": same, "README.md": "b"}},
		gitlabtest.Project{Path: "g/docs", Files: map[string]string{"README.md": "no dependency files"}},
	)
	c.opts.RESTOnly = true // the REST path's costs; GraphQL's: graphql_test.go
	ctx := context.Background()
	res, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	counts := c.srv.RequestCounts()
	if counts["GET /projects/:id/repository/tree"] != 4 || counts["GET /projects/:id/repository/blobs/:sha/raw"] != 3 ||
		res.Requests != 1+4+3 || res.BlobsRead != 3 {
		t.Errorf("first scan: %d requests %v, %d blobs; want 1 page + 4 trees + 3 blobs (base's Containerfile, the shared one, a's .gitlab-deps)", res.Requests, counts, res.BlobsRead)
	}
	base, err := c.st.Project(ctx, "g/base")
	if err != nil {
		t.Fatal(err)
	}
	if base.File != "Containerfile" || len(base.Files) != 1 || len(base.Dependencies) != 1 || base.Dependencies[0].Repository != "docker.io/library/debian" {
		t.Errorf("base: file %q, %d files, deps %+v; want only its Containerfile (the first name present) read", base.File, len(base.Files), base.Dependencies)
	}
	a, _ := c.st.Project(ctx, "g/a")
	b, _ := c.st.Project(ctx, "g/b")
	if len(a.Files) != 2 || len(b.Files) != 1 || string(b.Files[0].Content) != same || res.Edges != 3 {
		t.Errorf("a files %d, b files %+v, edges %d; want base→a, base→b, b→a", len(a.Files), b.Files, res.Edges)
	}
}

// TestRescanReusesStoredBlobs: a project whose files changed costs a tree
// listing, but content the store already holds (here another project's
// Containerfile) is not read again; only new content is.
func TestRescanReusesStoredBlobs(t *testing.T) {
	same := "FROM registry.example.com/g/base\n"
	c := newClocked(t,
		gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}},
		gitlabtest.Project{Path: "g/a", Files: map[string]string{"Containerfile": same}},
		gitlabtest.Project{Path: "g/docs", Files: map[string]string{"README.md": "no dependency files"}},
	)
	c.opts.RESTOnly = true
	ctx := context.Background()
	if _, err := scan.Run(ctx, c.gl, c.st, c.opts); err != nil {
		t.Fatal(err)
	}
	// docs gains a Containerfile identical to a's; base's changes.
	if _, err := c.srv.SetFile("g/docs", "Containerfile", same); err != nil {
		t.Fatal(err)
	}
	if _, err := c.srv.SetFile("g/base", "Containerfile", "FROM debian:bookworm\n"); err != nil {
		t.Fatal(err)
	}
	before := c.srv.RequestCounts()
	res, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	after := c.srv.RequestCounts()
	blobs := after["GET /projects/:id/repository/blobs/:sha/raw"] - before["GET /projects/:id/repository/blobs/:sha/raw"]
	trees := after["GET /projects/:id/repository/tree"] - before["GET /projects/:id/repository/tree"]
	if trees != 2 || blobs != 1 || res.BlobsRead != 1 || res.Edges != 2 {
		t.Errorf("rescan: %d trees, %d blobs (BlobsRead %d), %d edges; want 2 trees (base, docs), 1 blob (base's new content), edges base→a, base→docs",
			trees, blobs, res.BlobsRead, res.Edges)
	}
}
