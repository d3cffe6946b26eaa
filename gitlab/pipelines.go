package gitlab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// Pipeline is the part of a GitLab pipeline depsd uses.
type Pipeline struct {
	ID, ProjectID int64
	Ref, SHA      string
	// Tag says Ref is a tag. GitLab gives it for one pipeline, not in
	// lists (ListPipelines leaves it false).
	Tag    bool
	Status string // created, pending, running, success, failed, canceled, skipped, manual, ...
	Source string // api, push, schedule, trigger, web, ...
	WebURL string
	// Name is the pipeline's name (the CI configuration's workflow:name,
	// which may carry an input); empty without one.
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Duration is GitLab's `duration`: seconds the pipeline's jobs ran
	// (queueing excluded); zero until it finished, and absent from lists.
	Duration time.Duration
}

// Finished reports whether the pipeline reached a final status.
func (p Pipeline) Finished() bool {
	switch p.Status {
	case "success", "failed", "canceled", "skipped":
		return true
	}
	return false
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func fromPipeline(p *gl.Pipeline) Pipeline {
	return Pipeline{
		ID: p.ID, ProjectID: p.ProjectID, Ref: p.Ref, SHA: p.SHA, Status: p.Status, Tag: p.Tag,
		Source: string(p.Source), WebURL: p.WebURL, Name: p.Name,
		CreatedAt: timeOf(p.CreatedAt), UpdatedAt: timeOf(p.UpdatedAt),
		Duration: time.Duration(p.Duration) * time.Second,
	}
}

// CreateOptions are what a new pipeline carries besides its ref.
type CreateOptions struct {
	// Variables are pipeline variables, sent in key order. A project may
	// refuse them (ErrVariablesRefused).
	Variables map[string]string
	// Inputs are pipeline inputs (GitLab 17.10+), accepted only for the
	// inputs the project's CI configuration declares (ErrInputsRefused).
	Inputs map[string]string
}

// CreatePipeline creates a pipeline on ref (POST /projects/:id/pipeline,
// source "api") with the options' variables and inputs. It is not retried
// after a 5xx or a broken connection, since the pipeline may exist: such
// errors satisfy IsRetryable and the caller should look for the pipeline
// (ListPipelines + PipelineVariables) before creating it again. A ref that
// does not exist is a permanent 400 ("Reference not found"); GitLab's
// pipeline-creation throttle is a retryable 400; refused variables or
// inputs are ErrVariablesRefused or ErrInputsRefused.
func (c *Client) CreatePipeline(ctx context.Context, projectID int64, ref string, o CreateOptions) (Pipeline, error) {
	vars := o.Variables
	keys := slices.Sorted(maps.Keys(vars))
	opt := &gl.CreatePipelineOptions{Ref: gl.Ptr(ref)}
	if len(o.Inputs) > 0 {
		opt.Inputs = gl.PipelineInputsOption{}
		for k, v := range o.Inputs {
			opt.Inputs[k] = gl.NewPipelineInputValue(v)
		}
	}
	if len(keys) > 0 {
		vs := make([]*gl.PipelineVariableOptions, 0, len(keys))
		for _, k := range keys {
			vs = append(vs, &gl.PipelineVariableOptions{Key: gl.Ptr(k), Value: gl.Ptr(vars[k]), VariableType: gl.Ptr(gl.EnvVariableType)})
		}
		opt.Variables = &vs
	}
	var p *gl.Pipeline
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		p, resp, err = c.gl.Pipelines.CreatePipeline(projectID, opt, o...)
		return resp, err
	})
	if err != nil {
		return Pipeline{}, fmt.Errorf("create pipeline for project %d on %s: %w", projectID, ref, err)
	}
	c.log.Info("pipeline created", "project_id", projectID, "ref", ref, "pipeline_id", p.ID)
	return fromPipeline(p), nil
}

// GetPipeline returns a pipeline's current state.
func (c *Client) GetPipeline(ctx context.Context, projectID, pipelineID int64) (Pipeline, error) {
	var p *gl.Pipeline
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		p, resp, err = c.gl.Pipelines.GetPipeline(projectID, pipelineID, o...)
		return resp, err
	})
	if err != nil {
		return Pipeline{}, fmt.Errorf("get pipeline %d of project %d: %w", pipelineID, projectID, err)
	}
	return fromPipeline(p), nil
}

// CancelPipeline cancels a pipeline and its jobs that have not finished
// (POST /projects/:id/pipelines/:pipeline_id/cancel) and returns it as
// GitLab answers. Canceling is idempotent, so it is retried like a read. A
// pipeline that already ended is not an error: GitLab before 18.0 answers
// it as it is, 18.0 and later 422 "Pipeline is not cancelable", after
// which it is read (GetPipeline) and returned.
func (c *Client) CancelPipeline(ctx context.Context, projectID, pipelineID int64) (Pipeline, error) {
	var p *gl.Pipeline
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		p, resp, err = c.gl.Pipelines.CancelPipelineBuild(projectID, pipelineID, o...)
		return resp, err
	})
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity {
		return c.GetPipeline(ctx, projectID, pipelineID)
	}
	if err != nil {
		return Pipeline{}, fmt.Errorf("cancel pipeline %d of project %d: %w", pipelineID, projectID, err)
	}
	return fromPipeline(p), nil
}

// PipelineFilter selects pipelines for ListPipelines.
type PipelineFilter struct {
	Ref string // branch or tag; empty: any
	SHA string // the commit; empty: any
	// Source filters by source; empty means "api", the pipelines depsd
	// creates. Use "any" for no filter.
	Source string
	// Status, if set, keeps pipelines in this status (e.g. "success").
	Status string
	// UpdatedAfter, if set, keeps pipelines updated after it.
	UpdatedAfter time.Time
	// CreatedAfter, if set, keeps pipelines created after it.
	CreatedAfter time.Time
	// Username, if set, keeps pipelines created by this user.
	Username string
	// Limit is the most pipelines returned, newest first. Default 100.
	Limit int
	// OldestUpdatedFirst orders by updated_at ascending instead: with
	// UpdatedAfter, a full page then ends where the next read resumes.
	OldestUpdatedFirst bool
}

// ListPipelines returns recent pipelines of a project, newest first.
func (c *Client) ListPipelines(ctx context.Context, projectID int64, f PipelineFilter) ([]Pipeline, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	opt := &gl.ListProjectPipelinesOptions{
		ListOptions: gl.ListOptions{PerPage: int64(min(f.Limit, 100)), Page: 1},
		OrderBy:     gl.Ptr("id"),
		Sort:        gl.Ptr("desc"),
	}
	if f.OldestUpdatedFirst {
		opt.OrderBy, opt.Sort = gl.Ptr("updated_at"), gl.Ptr("asc")
	}
	if f.Ref != "" {
		opt.Ref = gl.Ptr(f.Ref)
	}
	if f.SHA != "" {
		opt.SHA = gl.Ptr(f.SHA)
	}
	switch f.Source {
	case "":
		opt.Source = gl.Ptr("api")
	case "any":
	default:
		opt.Source = gl.Ptr(f.Source)
	}
	if f.Status != "" {
		opt.Status = gl.Ptr(gl.BuildStateValue(f.Status))
	}
	if !f.UpdatedAfter.IsZero() {
		opt.UpdatedAfter = gl.Ptr(f.UpdatedAfter.UTC())
	}
	if !f.CreatedAfter.IsZero() {
		opt.CreatedAfter = gl.Ptr(f.CreatedAfter.UTC())
	}
	if f.Username != "" {
		opt.Username = gl.Ptr(f.Username)
	}
	var out []Pipeline
	for {
		var ps []*gl.PipelineInfo
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			ps, resp, err = c.gl.Pipelines.ListProjectPipelines(projectID, opt, o...)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list pipelines of project %d: %w", projectID, err)
		}
		for _, p := range ps {
			out = append(out, Pipeline{
				ID: p.ID, ProjectID: p.ProjectID, Ref: p.Ref, SHA: p.SHA, Status: p.Status,
				Source: p.Source, WebURL: p.WebURL, Name: p.Name, CreatedAt: timeOf(p.CreatedAt), UpdatedAt: timeOf(p.UpdatedAt),
			})
			if len(out) == f.Limit {
				return out, nil
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// PipelineVariables returns the variables a pipeline was created with.
func (c *Client) PipelineVariables(ctx context.Context, projectID, pipelineID int64) (map[string]string, error) {
	var vs []*gl.PipelineVariable
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		vs, resp, err = c.gl.Pipelines.GetPipelineVariables(projectID, pipelineID, o...)
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("get variables of pipeline %d of project %d: %w", pipelineID, projectID, err)
	}
	out := make(map[string]string, len(vs))
	for _, v := range vs {
		out[v.Key] = v.Value
	}
	return out, nil
}

// SuccessfulDurations returns GitLab's duration of up to n of the most
// recent successful pipelines of a project on ref (any source), newest
// first: what a rebuild estimate goes by. GitLab's pipeline list carries no
// duration, so each pipeline is read: 1 + n requests per project.
func (c *Client) SuccessfulDurations(ctx context.Context, projectID int64, ref string, n int) ([]time.Duration, error) {
	list, err := c.ListPipelines(ctx, projectID, PipelineFilter{Ref: ref, Source: "any", Status: "success", Limit: n})
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, len(list))
	for _, p := range list {
		full, err := c.GetPipeline(ctx, projectID, p.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, full.Duration)
	}
	return out, nil
}
