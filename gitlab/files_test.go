package gitlab

import (
	"context"
	"errors"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

func TestReadFile(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{
		"Containerfile":         "FROM registry.example.com/g/base:latest\n",
		"docker/web.Dockerfile": "FROM debian\n",
	}}))
	first, _ := srv.Project("g/app")
	must(srv.SetFile("g/app", "Containerfile", "FROM registry.example.com/g/other\n"))
	emptyID := must(srv.AddProject(gitlabtest.Project{Path: "g/empty", EmptyRepo: true}))

	tests := []struct {
		name      string
		project   int64
		path, ref string
		want      string
		err       error
	}{
		{"at branch", id, "Containerfile", "main", "FROM registry.example.com/g/other\n", nil},
		{"at an older commit", id, "Containerfile", first.HeadCommit, "FROM registry.example.com/g/base:latest\n", nil},
		{"in a directory with dots", id, "docker/web.Dockerfile", "main", "FROM debian\n", nil},
		{"missing file", id, ".gitlab-deps", "main", "", ErrNotFound},
		{"missing ref", id, "Containerfile", "nope", "", ErrNotFound},
		{"empty repository", emptyID, "Containerfile", "main", "", ErrNotFound},
		{"missing project", 999999, "Containerfile", "main", "", ErrNotFound},
	}
	c, _ := newClient(t, srv, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.ReadFile(context.Background(), tt.project, tt.path, tt.ref)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !IsPermanent(err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
