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
	// version does not report it (before 19.0).
	TokenPresent *bool
	// SigningTokenPresent says whether a signing token is set (GitLab
	// 19.0+); nil when this GitLab does not report it. It stays false on a
	// GitLab that ignores signing_token (the webhook_signing_token flag
	// off).
	SigningTokenPresent *bool
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

// hookOwner is where a hook lives: a project or a group. base is its API
// path ("projects/12", "groups/infra%2Fimages"), name how errors say it.
type hookOwner struct {
	base, name string
	projectID  int64  // 0 for a group
	group      string // "" for a project
}

func projectHooks(projectID int64) hookOwner {
	return hookOwner{base: fmt.Sprintf("projects/%d", projectID), name: fmt.Sprintf("project %d", projectID), projectID: projectID}
}

func groupHooks(group string) hookOwner {
	return hookOwner{base: "groups/" + gl.PathEscape(group), name: "group " + group, group: group}
}

// ListHooks returns a project's hooks (all pages).
func (c *Client) ListHooks(ctx context.Context, projectID int64) ([]Hook, error) {
	return c.listHooks(ctx, projectHooks(projectID))
}

// ListGroupHooks returns a group's hooks (all pages; GET
// /groups/:id/hooks: Premium, Owner role).
func (c *Client) ListGroupHooks(ctx context.Context, group string) ([]Hook, error) {
	return c.listHooks(ctx, groupHooks(group))
}

func (c *Client) listHooks(ctx context.Context, o hookOwner) ([]Hook, error) {
	var out []Hook
	for page := int64(1); page != 0; {
		var raw []map[string]any
		var resp *gl.Response
		err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
			// Decoded by hand: client-go's struct cannot tell a missing
			// token_present from false.
			req, err := c.gl.NewRequest("GET", o.base+"/hooks", &gl.ListOptions{PerPage: 100, Page: page}, ro)
			if err != nil {
				return nil, err
			}
			raw = nil
			resp, err = c.gl.Do(req, &raw)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list hooks of %s: %w", o.name, err)
		}
		for _, m := range raw {
			out = append(out, hookFromMap(o.projectID, m))
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
	if b, ok := m["signing_token_present"].(bool); ok {
		h.SigningTokenPresent = &b
	}
	for k, v := range m {
		if on, _ := v.(bool); on && strings.HasSuffix(k, "_events") && k != "push_events" && k != "pipeline_events" {
			h.OtherEvents = append(h.OtherEvents, k)
		}
	}
	slices.Sort(h.OtherEvents)
	return h
}

// HookSpec is the one hook depsd wants on every project.
type HookSpec struct {
	// URL identifies depsd's hook: a hook with exactly this URL is depsd's.
	URL string
	// SecretToken is sent by GitLab as X-Gitlab-Token, by the hooks
	// ProjectSecret and GroupSecret give no secret of their own.
	SecretToken string
	// ProjectSecret, when set, gives each project hook its own
	// X-Gitlab-Token (hooks.secret_mode: per-project), and GroupSecret
	// each group hook its group's.
	ProjectSecret func(projectID int64) string
	GroupSecret   func(group string) string
	// SecretsPending says existing hooks may carry another secret than
	// the one this spec gives them (GitLab never shows it): a depsd
	// before per-project secrets installed the shared one, or the
	// secret or its mode changed. Every existing depsd hook is then
	// edited, as with RotateToken.
	SecretsPending bool
	// SigningToken, when set, is installed as the hook's signing_token
	// (GitLab 19.0+ then signs deliveries); GitLab never returns it.
	SigningToken string
	// Groups, when set (hooks.mode: group), each get one group hook (the
	// topmost of them: a group below another is covered by its hook). The
	// projects below a group whose hook works lose their depsd project
	// hooks once it answers a test delivery; a group where GitLab refuses
	// group hooks (403/404) is reported and its projects keep project
	// hooks. Projects outside the groups always get project hooks.
	Groups []string
	// RotateToken makes SyncHooks re-set the token on every existing depsd
	// hook. GitLab never returns a hook's token, so a changed secret cannot
	// be detected; use this after changing it.
	RotateToken bool
	// Progress, if set, is told by SyncHooks how many projects are done,
	// at the start and after each project. Calls do not overlap.
	Progress func(done, total int)
}

// hookAttributes is what depsd sets on its hook, create or edit: URL,
// tokens, push and pipeline events on, every other event off, no push
// branch filter, SSL verification on. signing_token is not in client-go's
// project hook options, hence a map.
func hookAttributes(spec HookSpec, o hookOwner, create bool) map[string]any {
	a := map[string]any{
		"url": spec.URL, "token": spec.secretOf(o),
		"push_events": true, "pipeline_events": true, "enable_ssl_verification": true,
	}
	if spec.SigningToken != "" {
		a["signing_token"] = spec.SigningToken
	}
	if create {
		a["name"] = "depsd"
		a["description"] = "Managed by depsd (hooks sync): rebuilds downstream projects"
		return a
	}
	a["push_events_branch_filter"] = ""
	for _, e := range otherHookEvents {
		a[e] = false
	}
	return a
}

// secretOf is the X-Gitlab-Token of o's hook.
func (spec HookSpec) secretOf(o hookOwner) string {
	switch {
	case o.projectID != 0 && spec.ProjectSecret != nil:
		return spec.ProjectSecret(o.projectID)
	case o.group != "" && spec.GroupSecret != nil:
		return spec.GroupSecret(o.group)
	}
	return spec.SecretToken
}

// otherHookEvents are the event switches depsd turns off on its hook.
var otherHookEvents = []string{
	"issues_events", "confidential_issues_events", "merge_requests_events", "tag_push_events",
	"note_events", "confidential_note_events", "job_events", "wiki_page_events", "deployment_events",
	"feature_flag_events", "releases_events", "milestone_events", "emoji_events", "vulnerability_events",
	"resource_access_token_events", "resource_deploy_token_events",
}

// AddHook creates depsd's hook on a project (see hookAttributes).
func (c *Client) AddHook(ctx context.Context, projectID int64, spec HookSpec) (Hook, error) {
	return c.addHook(ctx, projectHooks(projectID), spec)
}

// EditHook makes an existing hook match spec exactly (see
// hookAttributes). Saving a hook does not re-enable it if GitLab disabled
// it after failures: see TestHook.
func (c *Client) EditHook(ctx context.Context, projectID, hookID int64, spec HookSpec) (Hook, error) {
	return c.editHook(ctx, projectHooks(projectID), hookID, spec)
}

func (c *Client) addHook(ctx context.Context, o hookOwner, spec HookSpec) (Hook, error) {
	h, err := c.sendHook(ctx, false, "POST", o.base+"/hooks", hookAttributes(spec, o, true), o.projectID)
	if err != nil {
		return Hook{}, fmt.Errorf("add hook to %s: %w", o.name, err)
	}
	return h, nil
}

func (c *Client) editHook(ctx context.Context, o hookOwner, hookID int64, spec HookSpec) (Hook, error) {
	h, err := c.sendHook(ctx, true, "PUT", fmt.Sprintf("%s/hooks/%d", o.base, hookID), hookAttributes(spec, o, false), o.projectID)
	if err != nil {
		return Hook{}, fmt.Errorf("edit hook %d of %s: %w", hookID, o.name, err)
	}
	return h, nil
}

func (c *Client) sendHook(ctx context.Context, idempotent bool, method, path string, body map[string]any, projectID int64) (Hook, error) {
	var raw map[string]any
	err := c.call(ctx, idempotent, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
		req, err := c.gl.NewRequest(method, path, body, ro)
		if err != nil {
			return nil, err
		}
		raw = nil
		return c.gl.Do(req, &raw)
	})
	if err != nil {
		return Hook{}, err
	}
	return hookFromMap(projectID, raw), nil
}

// TestHook asks GitLab to send a test push event to a hook now (POST
// /projects/:id/hooks/:hook_id/test/push_events, Maintainer role). GitLab
// sends it even to a disabled hook, synchronously: it answers 201 when the
// receiver answered 2xx, and a successful delivery re-enables the hook; it
// answers 422 (an *APIError) when the delivery failed. It is not retried on
// 5xx, as it delivers an event. GitLab limits it to 5 requests a minute per
// user and project.
func (c *Client) TestHook(ctx context.Context, projectID, hookID int64) error {
	return c.testHook(ctx, projectHooks(projectID), hookID)
}

func (c *Client) testHook(ctx context.Context, o hookOwner, hookID int64) error {
	err := c.call(ctx, false, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
		req, err := c.gl.NewRequest("POST", fmt.Sprintf("%s/hooks/%d/test/push_events", o.base, hookID), nil, ro)
		if err != nil {
			return nil, err
		}
		return c.gl.Do(req, nil)
	})
	if err != nil {
		return fmt.Errorf("test hook %d of %s: %w", hookID, o.name, err)
	}
	return nil
}

// DeleteHook removes a hook.
func (c *Client) DeleteHook(ctx context.Context, projectID, hookID int64) error {
	return c.deleteHook(ctx, projectHooks(projectID), hookID)
}

func (c *Client) deleteHook(ctx context.Context, o hookOwner, hookID int64) error {
	err := c.call(ctx, true, func(ro ...gl.RequestOptionFunc) (*gl.Response, error) {
		req, err := c.gl.NewRequest("DELETE", fmt.Sprintf("%s/hooks/%d", o.base, hookID), nil, ro)
		if err != nil {
			return nil, err
		}
		return c.gl.Do(req, nil)
	})
	if err != nil {
		return fmt.Errorf("delete hook %d of %s: %w", hookID, o.name, err)
	}
	return nil
}
