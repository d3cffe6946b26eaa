package gitlab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

func TestListFilesAndReadBlob(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	files := map[string]string{
		"Containerfile":             "FROM debian\n",
		".gitlab-deps":              "g/base\n",
		"docker/Dockerfile":         "FROM alpine\n",
		"docs/Containerfile/README": "a directory named like a dependency file\n",
	}
	for i := range 150 { // two pages of root entries
		files[fmt.Sprintf("file-%03d.txt", i)] = fmt.Sprint(i)
	}
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: files}))
	emptyID := must(srv.AddProject(gitlabtest.Project{Path: "g/empty", EmptyRepo: true}))
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()

	srv.ResetRequests()
	got, err := c.ListFiles(ctx, id, "main", []string{"Containerfile", "Dockerfile", ".gitlab-deps", "docker/Dockerfile", "nope/Dockerfile", "docs/Containerfile"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Containerfile":     gitlabtest.BlobID(files["Containerfile"]),
		".gitlab-deps":      gitlabtest.BlobID(files[".gitlab-deps"]),
		"docker/Dockerfile": gitlabtest.BlobID(files["docker/Dockerfile"]),
	}
	if !maps.Equal(got, want) {
		t.Fatalf("ListFiles = %v, want %v", got, want)
	}
	// Root: 2 pages; docker/, docs/ and the missing nope/: one each.
	if n := srv.Requests("GET /projects/:id/repository/tree"); n != 5 || srv.TotalRequests() != 5 {
		t.Errorf("%d tree requests (%v), want 5", n, srv.RequestCounts())
	}
	// Blob ids are git's: the empty blob has a well-known id.
	if id := gitlabtest.BlobID(""); id != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("BlobID(\"\") = %s, not git's", id)
	}

	b, err := c.ReadBlob(ctx, id, want["docker/Dockerfile"])
	if err != nil || string(b) != files["docker/Dockerfile"] {
		t.Fatalf("ReadBlob = %q, %v", b, err)
	}
	// An older version stays readable by its id after a push.
	must(srv.SetFile("g/app", "Containerfile", "FROM debian:trixie\n"))
	if b, err := c.ReadBlob(ctx, id, want["Containerfile"]); err != nil || string(b) != "FROM debian\n" {
		t.Errorf("old blob = %q, %v", b, err)
	}

	for _, tc := range []struct {
		name    string
		project int64
		ref     string
		names   []string
	}{
		{"empty repository", emptyID, "main", []string{"Containerfile"}},
		{"missing ref", id, "nope", []string{"Containerfile"}},
		{"missing ref, names only in a directory", id, "nope", []string{"docker/Dockerfile"}},
		{"missing project", 999999, "main", []string{"Containerfile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ListFiles(ctx, tc.project, tc.ref, tc.names)
			if !errors.Is(err, ErrNotFound) || !IsPermanent(err) {
				t.Fatalf("err = %v, want ErrNotFound", err)
			}
		})
	}
	if _, err := c.ReadBlob(ctx, id, gitlabtest.BlobID("never committed")); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown blob: %v, want ErrNotFound", err)
	}
}
