package gitlab

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

func TestPipelines(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"a": "b"}}))
	info, _ := srv.Project("g/app")
	pushID := must(srv.AddPipeline("g/app", "main", "push", "success"))
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()

	vars := map[string]string{"DEPSD_CHAIN_ID": "c1", "DEPSD_ACTION_ID": "a1", "DEPSD_UPSTREAM": "g/base"}
	created, err := c.CreatePipeline(ctx, id, "main", CreateOptions{Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	if created.ID == 0 || created.ProjectID != id || created.Ref != "main" || created.SHA != info.HeadCommit ||
		created.Source != "api" || created.Status != "created" || !strings.HasSuffix(created.WebURL, "/g/app/-/pipelines/"+itoa(created.ID)) ||
		created.CreatedAt.IsZero() {
		t.Fatalf("created = %+v", created)
	}

	if err := srv.SetPipelineStatus(created.ID, "running"); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetPipeline(ctx, id, created.ID)
	if err != nil || got.Status != "running" || got.Finished() {
		t.Fatalf("get = %+v, %v", got, err)
	}

	gotVars, err := c.PipelineVariables(ctx, id, created.ID)
	if err != nil || !maps.Equal(gotVars, vars) {
		t.Fatalf("variables = %v, %v; want %v", gotVars, err, vars)
	}

	second := must(c.CreatePipeline(ctx, id, "main", CreateOptions{}))
	tests := []struct {
		name   string
		filter PipelineFilter
		want   []int64
	}{
		{"api pipelines newest first", PipelineFilter{Ref: "main"}, []int64{second.ID, created.ID}},
		{"any source", PipelineFilter{Ref: "main", Source: "any"}, []int64{second.ID, created.ID, pushID}},
		{"limit", PipelineFilter{Ref: "main", Limit: 1}, []int64{second.ID}},
		{"other ref", PipelineFilter{Ref: "dev"}, nil},
		{"updated after", PipelineFilter{UpdatedAfter: time.Now().Add(time.Hour)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := c.ListPipelines(ctx, id, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, p := range list {
				ids = append(ids, p.ID)
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("ids = %v, want %v", ids, tt.want)
			}
		})
	}

	t.Run("missing ref is permanent", func(t *testing.T) {
		_, err := c.CreatePipeline(ctx, id, "nope", CreateOptions{})
		if !IsPermanent(err) || !strings.Contains(err.Error(), "Reference not found") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("5xx on create is not retried", func(t *testing.T) {
		before := len(srv.Pipelines("g/app"))
		srv.ResetRequests()
		srv.Fail(gitlabtest.Fault{Endpoint: "POST /projects/:id/pipeline", Status: 502, Times: 3})
		_, err := c.CreatePipeline(ctx, id, "main", CreateOptions{})
		if !IsRetryable(err) {
			t.Fatalf("err = %v, want retryable", err)
		}
		if n := srv.Requests("POST /projects/:id/pipeline"); n != 1 {
			t.Fatalf("create requests = %d, want 1: a 5xx may hide a created pipeline", n)
		}
		if len(srv.Pipelines("g/app")) != before {
			t.Fatal("a pipeline was created")
		}
		srv.ClearFaults()
	})
	t.Run("429 on create is retried", func(t *testing.T) {
		srv.ResetRequests()
		srv.Fail(gitlabtest.Fault{Endpoint: "POST /projects/:id/pipeline", Status: 429, RetryAfter: time.Second})
		if _, err := c.CreatePipeline(ctx, id, "main", CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := srv.Requests("POST /projects/:id/pipeline"); n != 2 {
			t.Fatalf("create requests = %d, want 2", n)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestCancelPipeline cancels a running pipeline, and one that already
// ended as GitLab before 18.0 (200, as it is) and from 18.0 on (422
// "Pipeline is not cancelable") answer it: the pipeline as it is, no
// error, either way. A pipeline of another project is not found.
func TestCancelPipeline(t *testing.T) {
	for _, version := range []string{"17.11.1", "18.2.0"} {
		t.Run(version, func(t *testing.T) {
			srv := newFake(t, gitlabtest.Options{Version: version})
			id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"a": "b"}}))
			other := must(srv.AddProject(gitlabtest.Project{Path: "g/other", Files: map[string]string{"a": "b"}}))
			c, _ := newClient(t, srv, nil)
			ctx := context.Background()
			running := must(c.CreatePipeline(ctx, id, "main", CreateOptions{}))
			if err := srv.SetPipelineStatus(running.ID, "running"); err != nil {
				t.Fatal(err)
			}
			got, err := c.CancelPipeline(ctx, id, running.ID)
			if err != nil || got.ID != running.ID || got.Status != "canceled" {
				t.Fatalf("cancel running = %+v, %v", got, err)
			}
			done := must(c.CreatePipeline(ctx, id, "main", CreateOptions{}))
			if err := srv.SetPipelineStatus(done.ID, "success"); err != nil {
				t.Fatal(err)
			}
			got, err = c.CancelPipeline(ctx, id, done.ID)
			if err != nil || got.ID != done.ID || got.Status != "success" {
				t.Fatalf("cancel ended = %+v, %v", got, err)
			}
			if p, _ := c.GetPipeline(ctx, id, done.ID); p.Status != "success" {
				t.Fatalf("an ended pipeline was changed by a cancel: %+v", p)
			}
			if _, err := c.CancelPipeline(ctx, other, running.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("cancel through another project = %v, want ErrNotFound", err)
			}
		})
	}
}
