package gitlab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// Hook is a project webhook as GitLab reports it. The secret token is
// write-only in GitLab and never part of it.
type Hook struct {
	ID, ProjectID          int64
	URL                    string
	PushEvents             bool
	PipelineEvents         bool
	EnableSSLVerification  bool
	PushEventsBranchFilter string
	// OtherEvents are the other event switches that are on, by JSON name
	// (e.g. "tag_push_events"), sorted.
	OtherEvents []string
	// AlertStatus is "executable", "temporarily_disabled" or "disabled"
	// (after repeated delivery failures); empty if not reported.
	AlertStatus   string
	DisabledUntil time.Time
	// TokenPresent says whether a secret token is set; nil when this GitLab
	// version does not report it.
	TokenPresent *bool
}

// Disabled reports whether GitLab stopped delivering to the hook.
func (h Hook) Disabled(now time.Time) bool {
	switch h.AlertStatus {
	case "temporarily_disabled", "disabled":
		return true
	case "executable":
		return false
	}
	return h.DisabledUntil.After(now)
}

// ListHooks returns a project's hooks (all pages).
func (c *Client) ListHooks(ctx context.Context, projectID int64) ([]Hook, error) {
	var out []Hook
	for page := int64(1); page != 0; {
		var raw []map[string]any
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			// Decoded by hand: client-go's struct cannot tell a missing
			// token_present from false.
			req, err := c.gl.NewRequest("GET", fmt.Sprintf("projects/%d/hooks", projectID),
				&gl.ListOptions{PerPage: 100, Page: page}, o)
			if err != nil {
				return nil, err
			}
			raw = nil
			resp, err = c.gl.Do(req, &raw)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list hooks of project %d: %w", projectID, err)
		}
		for _, m := range raw {
			out = append(out, hookFromMap(projectID, m))
		}
		page = resp.NextPage
	}
	return out, nil
}

func hookFromMap(projectID int64, m map[string]any) Hook {
	h := Hook{ProjectID: projectID}
	if v, ok := m["id"].(float64); ok {
		h.ID = int64(v)
	}
	h.URL, _ = m["url"].(string)
	h.PushEvents, _ = m["push_events"].(bool)
	h.PipelineEvents, _ = m["pipeline_events"].(bool)
	h.EnableSSLVerification, _ = m["enable_ssl_verification"].(bool)
	h.PushEventsBranchFilter, _ = m["push_events_branch_filter"].(string)
	h.AlertStatus, _ = m["alert_status"].(string)
	if s, ok := m["disabled_until"].(string); ok {
		h.DisabledUntil, _ = time.Parse(time.RFC3339, s)
	}
	if b, ok := m["token_present"].(bool); ok {
		h.TokenPresent = &b
	}
	for k, v := range m {
		if on, _ := v.(bool); on && strings.HasSuffix(k, "_events") && k != "push_events" && k != "pipeline_events" {
			h.OtherEvents = append(h.OtherEvents, k)
		}
	}
	slices.Sort(h.OtherEvents)
	return h
}

func hookFromGL(h *gl.ProjectHook) Hook {
	out := Hook{
		ID: h.ID, ProjectID: h.ProjectID, URL: h.URL, PushEvents: h.PushEvents,
		PipelineEvents: h.PipelineEvents, EnableSSLVerification: h.EnableSSLVerification,
		PushEventsBranchFilter: h.PushEventsBranchFilter, AlertStatus: h.AlertStatus,
		DisabledUntil: timeOf(h.DisabledUntil),
	}
	return out
}

// HookSpec is the one hook depsd wants on every project.
type HookSpec struct {
	// URL identifies depsd's hook: a hook with exactly this URL is depsd's.
	URL string
	// SecretToken is sent by GitLab as X-Gitlab-Token.
	SecretToken string
	// RotateToken makes SyncHooks re-set the token on every existing depsd
	// hook. GitLab never returns a hook's token, so a changed secret cannot
	// be detected; use this after changing it.
	RotateToken bool
	// Progress, if set, is told by SyncHooks how many projects are done,
	// at the start and after each project. Calls do not overlap.
	Progress func(done, total int)
}

// AddHook creates depsd's hook on a project: push and pipeline events, the
// secret token, SSL verification on.
func (c *Client) AddHook(ctx context.Context, projectID int64, spec HookSpec) (Hook, error) {
	opt := &gl.AddProjectHookOptions{
		Name:                  gl.Ptr("depsd"),
		Description:           gl.Ptr("Managed by depsd (hooks sync): rebuilds downstream projects"),
		URL:                   gl.Ptr(spec.URL),
		PushEvents:            gl.Ptr(true),
		PipelineEvents:        gl.Ptr(true),
		EnableSSLVerification: gl.Ptr(true),
		Token:                 gl.Ptr(spec.SecretToken),
	}
	var h *gl.ProjectHook
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		h, resp, err = c.gl.Projects.AddProjectHook(projectID, opt, o...)
		return resp, err
	})
	if err != nil {
		return Hook{}, fmt.Errorf("add hook to project %d: %w", projectID, err)
	}
	return hookFromGL(h), nil
}

// EditHook makes an existing hook match spec exactly: URL, token, push and
// pipeline events on, every other event off, no push branch filter, SSL
// verification on. Saving a hook does not re-enable it if GitLab disabled it
// after failures: see TestHook.
func (c *Client) EditHook(ctx context.Context, projectID, hookID int64, spec HookSpec) (Hook, error) {
	off := gl.Ptr(false)
	opt := &gl.EditProjectHookOptions{
		URL:                       gl.Ptr(spec.URL),
		Token:                     gl.Ptr(spec.SecretToken),
		PushEvents:                gl.Ptr(true),
		PipelineEvents:            gl.Ptr(true),
		EnableSSLVerification:     gl.Ptr(true),
		PushEventsBranchFilter:    gl.Ptr(""),
		IssuesEvents:              off,
		ConfidentialIssuesEvents:  off,
		MergeRequestsEvents:       off,
		TagPushEvents:             off,
		NoteEvents:                off,
		ConfidentialNoteEvents:    off,
		JobEvents:                 off,
		WikiPageEvents:            off,
		DeploymentEvents:          off,
		FeatureFlagEvents:         off,
		ReleasesEvents:            off,
		MilestoneEvents:           off,
		EmojiEvents:               off,
		VulnerabilityEvents:       off,
		ResourceAccessTokenEvents: off,
		ResourceDeployTokenEvents: off,
	}
	var h *gl.ProjectHook
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		h, resp, err = c.gl.Projects.EditProjectHook(projectID, hookID, opt, o...)
		return resp, err
	})
	if err != nil {
		return Hook{}, fmt.Errorf("edit hook %d of project %d: %w", hookID, projectID, err)
	}
	return hookFromGL(h), nil
}

// TestHook asks GitLab to send a test push event to a hook now (POST
// /projects/:id/hooks/:hook_id/test/push_events, Maintainer role). GitLab
// sends it even to a disabled hook, synchronously: it answers 201 when the
// receiver answered 2xx, and a successful delivery re-enables the hook; it
// answers 422 (an *APIError) when the delivery failed. It is not retried on
// 5xx, as it delivers an event. GitLab limits it to 5 requests a minute per
// user and project.
func (c *Client) TestHook(ctx context.Context, projectID, hookID int64) error {
	err := c.call(ctx, false, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		return c.gl.Projects.TriggerTestProjectHook(projectID, hookID, gl.ProjectHookEventPush, o...)
	})
	if err != nil {
		return fmt.Errorf("test hook %d of project %d: %w", hookID, projectID, err)
	}
	return nil
}

// DeleteHook removes a hook.
func (c *Client) DeleteHook(ctx context.Context, projectID, hookID int64) error {
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		return c.gl.Projects.DeleteProjectHook(projectID, hookID, o...)
	})
	if err != nil {
		return fmt.Errorf("delete hook %d of project %d: %w", hookID, projectID, err)
	}
	return nil
}
