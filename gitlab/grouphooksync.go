package gitlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Group hook actions (hooks.mode: group).
const (
	// HookGroupRefused: GitLab refused the group hook (403/404: a Free
	// instance, or the token's user is not Owner of the group). The
	// group's projects keep project hooks. Reported, not a change.
	HookGroupRefused HookAction = "group-hook-refused"
	// HookReplacedByGroup: depsd's project hook was deleted, since the
	// group hook covering the project answered a test delivery.
	HookReplacedByGroup HookAction = "replaced-by-group-hook"
	// HookCoveredByGroup: the project has no depsd hook of its own and
	// the group hook delivers its events. Not a change.
	HookCoveredByGroup HookAction = "covered-by-group-hook"
)

// topGroups reduces groups to those not below another of them, sorted.
func topGroups(groups []string) []string {
	var out []string
	sorted := slices.Clone(groups)
	slices.Sort(sorted)
	for _, g := range sorted {
		if len(out) > 0 && (strings.EqualFold(out[len(out)-1], g) || hasPathPrefix(g, out[len(out)-1])) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// hasPathPrefix says whether path is below group (case-insensitive).
func hasPathPrefix(path, group string) bool {
	return len(path) > len(group) && path[len(group)] == '/' && strings.EqualFold(path[:len(group)], group)
}

// groupHook is the outcome of a group's hook in one sync.
type groupHook struct {
	path   string
	hookID int64
	ok     bool // the hook exists and GitLab runs it: projects may rely on it
	// answered is whether a test delivery to the hook succeeded; tested
	// lazily, once, by the first project that has a hook to remove.
	once     sync.Once
	answered bool
	testErr  error
}

// refusal says whether err is GitLab refusing group hooks (403, 404), and
// what the operator can do.
func refusal(group string, err error) (string, bool) {
	var ae *APIError
	if !errors.As(err, &ae) {
		return "", false
	}
	switch ae.Status {
	case http.StatusForbidden:
		return fmt.Sprintf("GitLab answered 403 to the hooks of group %s: group hooks need the Owner role on the group; "+
			"give the token's user Owner there, or set hooks.mode: project. Its projects keep project hooks", group), true
	case http.StatusNotFound:
		return fmt.Sprintf("GitLab answered 404 to the hooks of group %s: group hooks need GitLab Premium or Ultimate "+
			"(and the Owner role); on Free set hooks.mode: project. Its projects keep project hooks", group), true
	}
	return "", false
}

// syncGroupHook makes the group carry exactly one correct depsd hook, as a
// project's (planHooks). A refusal (403/404) is reported, not an error.
func (c *Client) syncGroupHook(ctx context.Context, group string, spec HookSpec, dryRun bool) ([]HookChange, *groupHook, error) {
	o := groupHooks(group)
	gh := &groupHook{path: group}
	hooks, err := c.listHooks(ctx, o)
	if why, refused := refusal(group, err); refused {
		c.log.Warn("group hook refused: project hooks kept", "group", group, "reason", why)
		return []HookChange{{Project: group, Group: true, Action: HookGroupRefused, Reasons: []string{why}}}, gh, nil
	}
	if err != nil {
		return nil, gh, err
	}
	var done []HookChange
	c.noteListedSigning(hooks, spec)
	for _, st := range planHooks(hooks, spec, c.cfg.Now(), c.signingIgnored.Load()) {
		step := st.HookChange
		step.Project, step.Group = group, true
		keep := step.Action != HookDeletedDuplicate
		if !dryRun {
			switch step.Action {
			case HookCreated:
				h, err := c.addHook(ctx, o, spec)
				if why, refused := refusal(group, err); refused {
					return append(done, HookChange{Project: group, Group: true, Action: HookGroupRefused, Reasons: []string{why}}), gh, nil
				}
				if err != nil {
					return done, gh, err
				}
				step.HookID = h.ID
				c.noteSigning(&step, h, spec)
			case HookUpdated, HookReenabled:
				if st.edit {
					h, err := c.editHook(ctx, o, step.HookID, spec)
					if err != nil {
						return done, gh, err
					}
					c.noteSigning(&step, h, spec)
				}
				if st.test {
					if err := c.reenable(ctx, o, spec.URL, &step); err != nil {
						return done, gh, err
					}
					if step.Action == HookReenabled {
						gh.once.Do(func() { gh.answered = true })
					}
				}
			case HookDeletedDuplicate:
				if err := c.deleteHook(ctx, o, step.HookID); err != nil && !errors.Is(err, ErrNotFound) {
					return done, gh, err
				}
			}
		}
		if keep {
			gh.hookID = step.HookID
			switch step.Action {
			case HookCreated, HookUpdated, HookUnchanged, HookReenabled:
				gh.ok = true
			}
		}
		if step.Action != HookUnchanged && step.Action != HookTemporarilyDisabled {
			level := slog.LevelInfo
			if dryRun {
				level = slog.LevelDebug
			}
			c.log.Log(ctx, level, "group hook synced", "group", group, "hook_id", step.HookID,
				"action", string(step.Action), "reasons", strings.Join(step.Reasons, "; "), "dry_run", dryRun)
		}
		done = append(done, step)
	}
	return done, gh, nil
}

// answers tests the group hook once per sync (GitLab limits test
// deliveries to 5 a minute): whether it delivers to depsd now.
func (c *Client) answers(ctx context.Context, gh *groupHook) (bool, error) {
	gh.once.Do(func() {
		err := c.testHook(ctx, groupHooks(gh.path), gh.hookID)
		var ae *APIError
		switch {
		case err == nil:
			gh.answered = true
		case errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity:
			// The delivery was made and not answered 2xx.
		default:
			gh.testErr = err
		}
	})
	return gh.answered, gh.testErr
}

// syncCoveredProject handles a project below a working group hook: its
// depsd project hooks are deleted once the group hook answers a test
// delivery; until then they are kept and repaired as usual.
func (c *Client) syncCoveredProject(ctx context.Context, p Project, gh *groupHook, spec HookSpec, dryRun bool) ([]HookChange, error) {
	hooks, err := c.ListHooks(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	var mine []Hook
	for _, h := range hooks {
		if h.URL == spec.URL {
			mine = append(mine, h)
		}
	}
	if len(mine) == 0 {
		return []HookChange{{Project: p.Path, ProjectID: p.ID, Action: HookCoveredByGroup,
			Reasons: []string{"the hook of group " + gh.path + " delivers its events"}}}, nil
	}
	if dryRun {
		var out []HookChange
		for _, h := range mine {
			out = append(out, HookChange{Project: p.Path, ProjectID: p.ID, HookID: h.ID, Action: HookReplacedByGroup,
				Reasons: []string{"once the hook of group " + gh.path + " answers a test delivery"}})
		}
		return out, nil
	}
	ok, err := c.answers(ctx, gh)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Both hooks deliver meanwhile; depsd counts a pipeline's status
		// once whichever delivery comes first.
		return c.syncProjectHooksListed(ctx, p, hooks, spec, false,
			"kept: the hook of group "+gh.path+" did not answer its test delivery")
	}
	var out []HookChange
	for _, h := range mine {
		if err := c.DeleteHook(ctx, p.ID, h.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return out, err
		}
		c.log.Info("hook synced", "project", p.Path, "project_id", p.ID, "hook_id", h.ID, "action", string(HookReplacedByGroup))
		out = append(out, HookChange{Project: p.Path, ProjectID: p.ID, HookID: h.ID, Action: HookReplacedByGroup,
			Reasons: []string{"the hook of group " + gh.path + " answers"}})
	}
	return out, nil
}
