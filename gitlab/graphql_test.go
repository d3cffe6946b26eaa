package gitlab

import (
	"context"
	"errors"
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
