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
