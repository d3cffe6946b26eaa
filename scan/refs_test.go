package scan_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

const (
	branchesEndpoint = "GET /projects/:id/repository/branches"
	tagsEndpoint     = "GET /projects/:id/repository/tags"
	treeEndpoint     = "GET /projects/:id/repository/tree"
)

// refsFleet is issue 36's fleet on a fake GitLab: base with a bookworm
// branch of its own, a feature branch and release tags; ruby with a
// bookworm branch FROM base's; app, which has no bookworm branch. The
// pushes are older than GitLab's hour of last_activity_at, so a later
// scan can tell nothing moved.
func refsFleet(t *testing.T) *clocked {
	t.Helper()
	const reg = "registry.example.com/"
	c := newClocked(t,
		gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian:trixie\n"}},
		gitlabtest.Project{Path: "g/ruby", Files: map[string]string{"Containerfile": "FROM " + reg + "g/base:3\n"}},
		gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM " + reg + "g/ruby:latest\n"}})
	srv := c.srv
	for _, b := range []string{"bookworm", "feature/x"} {
		if err := srv.CreateBranch("g/base", b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.SetFileOn("g/base", "bookworm", "Containerfile", "FROM debian:bookworm\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetFileOn("g/base", "feature/x", "Containerfile", "FROM debian:sid\n"); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateBranch("g/ruby", "bookworm"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetFileOn("g/ruby", "bookworm", "Containerfile", "FROM "+reg+"g/base:bookworm\n"); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"v3.2.1", "v3.10.0-rc.1", "v3.9.0", "nightly"} {
		if err := srv.CreateTag("g/base", tag, "main"); err != nil {
			t.Fatal(err)
		}
	}
	c.opts.Refs = deps.RefRules{{Projects: []string{"g/base", "g/ruby", "g/app"}, Branches: []string{"bookworm"}, Tags: "v*"}}
	c.now = c.now.Add(2 * time.Hour)
	return c
}

// refsRecorder records the reads at refs a scan asks GraphQL for.
type refsRecorder struct {
	*gitlab.Client
	mu    sync.Mutex
	reads []gitlab.FilesAt
}

func (r *refsRecorder) ReadFilesAt(ctx context.Context, reads []gitlab.FilesAt, names []string) (gitlab.FilesAtAnswer, error) {
	r.mu.Lock()
	r.reads = append(r.reads, reads...)
	r.mu.Unlock()
	return r.Client.ReadFilesAt(ctx, reads, names)
}

// TestScanReadsFollowedRefs: a project a refs rule matches is read at
// every followed branch that exists and at its newest release tag (by
// version, not a pre-release, not another tag), each a node of the graph
// with its own dependencies; a followed branch a project does not have is
// no node; the requests it costs are counted apart; an unchanged rescan
// reads none of them again, and a rule that changes reads them again. So
// through REST (a branch and a tag listing each, a tree per ref) and
// through GraphQL, where the batch reads the branch names and bookworm's
// files beside the default branches, and one more request the release
// tag's files: the tag listings are REST's.
func TestScanReadsFollowedRefs(t *testing.T) {
	for _, tt := range []struct {
		name     string
		restOnly bool
		// first scan: requests for refs, and by endpoint
		refRequests             int
		graphQL, branches, tags int64
		trees                   int64
		// the scan after base's rule changed
		changedRequests int64
	}{
		// base: branches, tags, two trees; ruby: branches, tags, a tree;
		// app: branches, tags. The rule change: base's listings, three
		// trees and feature/x's new Containerfile (bookworm's is known
		// from the last scan).
		{"REST", true, 9, 0, 3, 3, 3 + 3, 1 + 6},
		// One batch, the tags of each, the tag's files. The rule change:
		// a batch of base's branches alone, its tags, the files of
		// feature/x and the tag.
		{"GraphQL", false, 4, 2, 0, 3, 0, 1 + 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := refsFleet(t)
			c.opts.RESTOnly = tt.restOnly
			rec := &refsRecorder{Client: c.gl}
			ctx := context.Background()
			res, err := scan.Run(ctx, rec, c.st, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			counts := c.srv.RequestCounts()
			if res.RefRequests != tt.refRequests || counts[gitlabtest.GraphQLEndpoint] != tt.graphQL || counts[branchesEndpoint] != tt.branches ||
				counts[tagsEndpoint] != tt.tags || counts[treeEndpoint] != tt.trees {
				t.Errorf("%d ref requests, by endpoint %v; want %d: %d GraphQL, %d branch and %d tag listings, %d trees",
					res.RefRequests, counts, tt.refRequests, tt.graphQL, tt.branches, tt.tags, tt.trees)
			}
			if want := []gitlab.FilesAt{{Path: "g/base", Ref: "v3.9.0"}}; !tt.restOnly && !reflect.DeepEqual(rec.reads, want) {
				t.Errorf("read at refs apart from the batch: %+v; want the release tag's files alone (bookworm's come with the batch)", rec.reads)
			}
			base, err := c.st.Project(ctx, "g/base")
			if err != nil {
				t.Fatal(err)
			}
			if len(base.Refs) != 2 || base.Refs[0].Node != "g/base@bookworm" || base.Refs[1].Node != "g/base@tags" || base.Refs[1].Ref != "v3.9.0" {
				t.Fatalf("base's refs %+v: want bookworm and the release v3.9.0", base.Refs)
			}
			if b := base.Refs[0]; len(b.Dependencies) != 1 || b.Dependencies[0].Image != "docker.io/library/debian:bookworm" {
				t.Errorf("base@bookworm's dependencies %+v: want its own branch's", b.Dependencies)
			}
			if tag := base.Refs[1]; len(tag.Dependencies) != 1 || tag.Dependencies[0].Image != "docker.io/library/debian:trixie" {
				t.Errorf("base@tags' dependencies %+v: want the tag's (main's) files", tag.Dependencies)
			}
			g, err := c.st.Graph(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for node, want := range map[string][]string{
				"g/base@tags":     {"g/ruby"},
				"g/base@bookworm": {"g/ruby@bookworm"},
				"g/ruby":          {"g/app"},
				"g/base":          nil,
			} {
				if got := g.Downstream(node); !slices.Equal(got, want) {
					t.Errorf("downstream of %s = %q, want %q", node, got, want)
				}
			}
			if g.Has("g/app@bookworm") || g.Has("g/app@tags") {
				t.Errorf("g/app has no bookworm branch and no release, yet nodes %v", g.Projects())
			}

			// Nothing moved: nothing is read again.
			c.now = c.now.Add(time.Minute)
			again, err := scan.Run(ctx, rec, c.st, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if again.RefRequests != 0 || again.Requests != 1 {
				t.Errorf("unchanged rescan: %d requests, %d for refs; want 1 (the listing) and none", again.Requests, again.RefRequests)
			}
			// Another rule: ruby and app no longer follow anything.
			c.opts.Refs = deps.RefRules{{Projects: []string{"g/base"}, Branches: []string{"bookworm"}, Tags: "v*"}}
			c.now = c.now.Add(time.Minute)
			if _, err := scan.Run(ctx, rec, c.st, c.opts); err != nil {
				t.Fatal(err)
			}
			if ruby, _ := c.st.Project(ctx, "g/ruby"); len(ruby.Refs) != 0 {
				t.Errorf("ruby's refs after its rule went: %+v", ruby.Refs)
			}
			if g, _ := c.st.Graph(ctx); g.Has("g/ruby@bookworm") {
				t.Error("g/ruby@bookworm is still a node")
			}
			// base's rule changes (feature/* too): its refs are read
			// again, though its files did not move.
			c.opts.Refs = deps.RefRules{{Projects: []string{"g/base"}, Branches: []string{"bookworm", "feature/*"}, Tags: "v*"}}
			c.now = c.now.Add(time.Minute)
			changed, err := scan.Run(ctx, rec, c.st, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if changed.Requests != tt.changedRequests || changed.Unchanged != 3 {
				t.Errorf("rule change: %d requests, %d projects unchanged; want %d and all 3", changed.Requests, changed.Unchanged, tt.changedRequests)
			}
			base, _ = c.st.Project(ctx, "g/base")
			var nodes []string
			for _, r := range base.Refs {
				nodes = append(nodes, r.Node)
			}
			if want := []string{"g/base@bookworm", "g/base@feature/x", "g/base@tags"}; !slices.Equal(nodes, want) {
				t.Errorf("base's nodes after its rule changed: %q, want %q", nodes, want)
			}
		})
	}
}

// refsOf is every project's refs as a user sees them: node, ref, version
// of the files, dependencies, warnings.
func refsOf(t *testing.T, st *store.Store) map[string][]scan.Ref {
	t.Helper()
	ps, err := st.Projects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]scan.Ref{}
	for _, p := range ps {
		var refs []scan.Ref
		for _, r := range p.Refs {
			refs = append(refs, scan.Ref{Node: r.Node, Kind: r.Kind, Ref: r.Ref, HeadCommit: r.HeadCommit, File: r.File,
				Dependencies: r.Dependencies, Warnings: r.Warnings})
		}
		out[p.Path] = refs
	}
	return out
}

// restRefsTwin scans c's instance through REST only into a store of its
// own and returns its refs (refsOf).
func restRefsTwin(t *testing.T, c *clocked) map[string][]scan.Ref {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "rest.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := c.opts
	o.RESTOnly, o.Logger = true, nil
	if _, err := scan.Run(context.Background(), c.gl, st, o); err != nil {
		t.Fatal(err)
	}
	return refsOf(t, st)
}

// TestScanReadsFollowedRefsThroughGraphQL: what GraphQL reads of the
// refs is what REST reads, down to the version digests, in every case:
// wildcard branches (their files read apart from the batch), branches
// past a page of names (listed through REST), more literal branches than
// fit beside the names (the rest read apart), and when GraphQL fails a
// part: a field error on the names or the blobs, a GitLab without
// branchNames (each project's refs through REST).
func TestScanReadsFollowedRefsThroughGraphQL(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*testing.T, *clocked)
		// requests by endpoint of the first scan
		graphQL, branches, trees int64
	}{
		{"wildcards", func(t *testing.T, c *clocked) {
			c.opts.Refs = deps.RefRules{{Projects: []string{"g/*"}, Branches: []string{"bookworm", "feature/*"}, Tags: "v*"}}
		}, 1 + 1, 0, 0},
		{"more branches than a page of names", func(t *testing.T, c *clocked) {
			for i := range gitlab.BranchNamesPage {
				if err := c.srv.CreateBranch("g/base", fmt.Sprintf("a/%03d", i)); err != nil {
					t.Fatal(err)
				}
			}
			c.opts.Refs = deps.RefRules{{Projects: []string{"g/*"}, Branches: []string{"bookworm", "feature/*"}, Tags: "v*"}}
		}, 1 + 1, 2, 0}, // base's branches listed, two pages
		{"more literal branches than fit beside the names", func(t *testing.T, c *clocked) {
			for _, b := range []string{"b1", "b2", "b3", "b4"} {
				if err := c.srv.CreateBranch("g/base", b); err != nil {
					t.Fatal(err)
				}
			}
			c.opts.Refs = deps.RefRules{{Projects: []string{"g/*"}, Branches: []string{"bookworm", "b1", "b2", "b3", "b4"}, Tags: "v*"}}
		}, 1 + 1, 0, 0},
		{"branch names time out", func(t *testing.T, c *clocked) { c.srv.SetGraphQLTimeouts("Repository.branchNames") }, 1, 3, 3},
		{"blobs time out", func(t *testing.T, c *clocked) { c.srv.SetGraphQLTimeouts("Repository.blobs") }, 1, 3, 3 + 3},
		{"no branchNames", func(t *testing.T, c *clocked) { c.srv.SetNoBranchNames(true) }, 2, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := refsFleet(t)
			tt.setup(t, c)
			res, err := scan.Run(context.Background(), c.gl, c.st, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			counts := c.srv.RequestCounts()
			if counts[gitlabtest.GraphQLEndpoint] != tt.graphQL || counts[branchesEndpoint] != tt.branches || counts[treeEndpoint] != tt.trees {
				t.Errorf("requests %v (%d for refs); want %d GraphQL, %d branch listings, %d trees", counts, res.RefRequests, tt.graphQL, tt.branches, tt.trees)
			}
			c.srv.SetGraphQLTimeouts()
			got, want := refsOf(t, c.st), restRefsTwin(t, c)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("refs differ from the REST scan's:\n got  %+v\n want %+v", got, want)
			}
			if len(got["g/base"]) < 2 {
				t.Errorf("base's refs: %+v", got["g/base"])
			}
		})
	}
}

// TestUnchangedRefKeepsItsWarningsOnce: a followed branch of a project
// the listing vouches for is kept as stored and analysed again; its
// warnings are the analysis's, not the stored ones with the analysis's
// added (they piled up, one more copy each scan).
func TestUnchangedRefKeepsItsWarningsOnce(t *testing.T) {
	c := newClocked(t, gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}})
	if err := c.srv.CreateBranch("g/base", "bookworm"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.srv.SetFileOn("g/base", "bookworm", "Containerfile", "FROM alpine\nRUN <<EOF\nnever closed\n"); err != nil {
		t.Fatal(err)
	}
	c.opts.Refs = deps.RefRules{{Projects: []string{"g/base"}, Branches: []string{"bookworm"}}}
	ctx := context.Background()
	for scans := 1; scans <= 3; scans++ {
		c.now = c.now.Add(2 * time.Hour) // the activity is old: unchanged after the first scan
		res, err := scan.Run(ctx, c.gl, c.st, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if scans > 1 && res.Unchanged != 1 {
			t.Fatalf("scan %d: %d unchanged, want g/base", scans, res.Unchanged)
		}
		p, err := c.st.Project(ctx, "g/base")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Refs) != 1 || len(p.Refs[0].Warnings) != 1 {
			t.Fatalf("scan %d: refs %+v, want bookworm with its one warning", scans, p.Refs)
		}
	}
}
