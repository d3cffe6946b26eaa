package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// TestReadFilesBatchIsAnAPIRequest: a GraphQL read passes the client's
// limits and retry layer like any REST call: GitLab's 429 on it is waited
// out (Retry-After) and retried, every attempt counts in Requests, and a
// GitLab without the endpoint (404) is ErrGraphQLUnsupported.
func TestReadFilesBatchIsAnAPIRequest(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	if _, err := srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM alpine\n"}}); err != nil {
		t.Fatal(err)
	}
	c, rec := newClient(t, srv, nil)
	srv.Fail(gitlabtest.Fault{Endpoint: gitlabtest.GraphQLEndpoint, Status: 429, RetryAfter: 7 * time.Second})
	got, err := c.ReadFilesBatch(context.Background(), []string{"g/app", "g/none"}, []string{"Containerfile", "Dockerfile"})
	if err != nil {
		t.Fatal(err)
	}
	app, ok := got["g/app"]
	if _, none := got["g/none"]; !ok || none || app.RootRef != "main" || len(app.Blobs) != 1 ||
		string(app.Blobs["Containerfile"].Content) != "FROM alpine\n" || !app.Blobs["Containerfile"].Complete ||
		app.Blobs["Containerfile"].ID != gitlabtest.BlobID("FROM alpine\n") {
		t.Errorf("answer %+v", got)
	}
	waits := rec.all()
	if c.Requests() != 2 || srv.Requests(gitlabtest.GraphQLEndpoint) != 2 || len(waits) != 1 || waits[0] < 7*time.Second {
		t.Errorf("%d requests (fake: %d), waits %v; want the 429 waited out (≥ 7s) and retried once", c.Requests(), srv.Requests(gitlabtest.GraphQLEndpoint), waits)
	}

	srv.Fail(gitlabtest.Fault{Endpoint: gitlabtest.GraphQLEndpoint, Status: 404})
	if _, err := c.ReadFilesBatch(context.Background(), []string{"g/app"}, []string{"Containerfile"}); !errors.Is(err, ErrGraphQLUnsupported) {
		t.Errorf("no GraphQL endpoint: %v, want ErrGraphQLUnsupported", err)
	}
}

// TestFilesQueryComplexity: what GitLab's rules (the fake's
// graphql_complexity.go) make of the batch read: 39 with the three default
// names, three more a name: 73 names (249) fit under 250 whatever the
// number of projects (fullPaths does not count).
func TestFilesQueryComplexity(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	c, _ := newClient(t, srv, nil)
	q := strings.Replace(filesQuery, "{\n  projects(", "{\n  queryComplexity { score }\n  projects(", 1)
	for _, tt := range []struct{ names, score int }{{3, 39 + 2}, {72, 246 + 2}} {
		names := make([]any, tt.names)
		for i := range names {
			names[i] = fmt.Sprint("f", i)
		}
		paths := make([]any, MaxFilesBatch)
		for i := range paths {
			paths[i] = fmt.Sprint("g/p", i)
		}
		var ans struct {
			Data struct {
				QueryComplexity struct{ Score int } `json:"queryComplexity"`
			} `json:"data"`
		}
		if err := c.graphQL(context.Background(), q, map[string]any{"paths": paths, "names": names}, &ans); err != nil {
			t.Fatal(err)
		}
		if ans.Data.QueryComplexity.Score != tt.score {
			t.Errorf("%d names: complexity %d, want %d (queryComplexity itself counts 2)", tt.names, ans.Data.QueryComplexity.Score, tt.score)
		}
	}
}
