package gitlab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// HookAction is what SyncHooks did (or, in a dry run, would do) to a hook.
type HookAction string

// Hook actions.
const (
	HookCreated   HookAction = "created"
	HookUpdated   HookAction = "updated"
	HookReenabled HookAction = "reenabled"
	// HookStillDisabled: the hook was permanently disabled by GitLab and
	// the test delivery sent to re-enable it failed. Counted as a change so
	// that the operator sees it.
	HookStillDisabled HookAction = "still-disabled"
	// HookTemporarilyDisabled: GitLab paused the hook after failures and
	// retries it by itself when disabled_until passes. Reported, but not a
	// change: nothing is sent.
	HookTemporarilyDisabled HookAction = "temporarily-disabled"
	HookDeletedDuplicate    HookAction = "deleted-duplicate"
	HookUnchanged           HookAction = "unchanged"
)

// HookChange is one line of a HookReport.
type HookChange struct {
	// Project is the project's path, or the group's for a group hook.
	Project string
	// Group: the entry is a group hook (hooks.mode: group).
	Group     bool
	ProjectID int64
	HookID    int64 // 0 for a hook not created yet (dry run)
	Action    HookAction
	// Reasons say why, e.g. "pipeline_events off", "token not set",
	// "disabled by GitLab (temporarily_disabled)".
	Reasons []string
	// Unsigned: depsd asked for a signing token but GitLab does not keep
	// one on this hook (before 19.0, or the webhook_signing_token flag
	// off): its deliveries are not signed. Not an error.
	Unsigned bool
}

// HookReport lists per project what SyncHooks did, sorted by project path
// then hook id. Projects that failed are in the returned error instead.
type HookReport struct {
	DryRun  bool
	Changes []HookChange
}

// Changed counts the entries that are not HookUnchanged or
// HookTemporarilyDisabled: zero on an idempotent second run.
func (r HookReport) Changed() int {
	n := 0
	for _, c := range r.Changes {
		switch c.Action {
		case HookUnchanged, HookTemporarilyDisabled, HookGroupRefused, HookCoveredByGroup:
		default:
			n++
		}
	}
	return n
}

// Unsigned counts the hooks GitLab does not sign although depsd asked.
func (r HookReport) Unsigned() int {
	n := 0
	for _, c := range r.Changes {
		if c.Unsigned {
			n++
		}
	}
	return n
}

// UnsignedNote says what Unsigned hooks mean for the operator, or "".
func (r HookReport) UnsignedNote() string {
	n := r.Unsigned()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d hooks are not signed: this GitLab ignores signing_token (it needs 19.0 with the webhook_signing_token flag on); "+
		"their deliveries are checked by X-Gitlab-Token, and hooks.signing: required would refuse them", n)
}

// signingIgnoredReason is the reason a write's answer adds when GitLab
// kept no signing token.
const signingIgnoredReason = "GitLab ignored signing_token (before 19.0, or the webhook_signing_token flag is off)"

// Count counts the entries with action a.
func (r HookReport) Count(a HookAction) int {
	n := 0
	for _, c := range r.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// SyncHooks makes every project carry exactly one hook with spec.URL, set up
// as EditHook describes. Per project: no such hook → created; several → the
// oldest is kept and the others deleted; the kept one is edited when it
// drifted (events, SSL verification, branch filter, token missing, or
// spec.RotateToken). Editing a hook does not re-enable it on GitLab; only a
// successful delivery does. So a hook GitLab disabled for good
// (alert_status "disabled") is sent a test push event (TestHook) after any
// edit and read back: reported as reenabled if GitLab now runs it, else as
// still-disabled with the reason. A temporarily disabled hook is left to
// GitLab's own retry at disabled_until and reported as
// temporarily-disabled (not a change). Hooks with other URLs are
// never touched. Since GitLab never returns a token, a changed secret is
// only detected when the token is missing altogether; the token is always
// re-sent on edits, and RotateToken forces edits. With dryRun nothing is
// changed and the report says what would be.
//
// Projects are handled in parallel within the client's bounds, except
// that while a signing token is to be installed and it is not yet known
// whether this GitLab keeps one, they go one at a time until a write's
// answer (or a listed hook) tells; a failing project does not stop the
// others. The error joins the failures, each
// naming its project.
func (c *Client) SyncHooks(ctx context.Context, projects []Project, spec HookSpec, dryRun bool) (HookReport, error) {
	if spec.URL == "" {
		return HookReport{}, errors.New("hooks sync: no hook URL configured")
	}
	if spec.SecretToken == "" {
		return HookReport{}, errors.New("hooks sync: no webhook secret configured")
	}
	var (
		mu      sync.Mutex
		changes []HookChange
		errs    []error
	)
	// Group mode: each group's hook first (sequentially: they are few),
	// then the projects, below a working group hook or not.
	var covering []*groupHook
	for _, group := range topGroups(spec.Groups) {
		ch, gh, err := c.syncGroupHook(ctx, group, spec, dryRun)
		changes = append(changes, ch...)
		if err != nil {
			errs = append(errs, fmt.Errorf("sync the hook of group %s: %w", group, err))
		}
		if gh.ok {
			covering = append(covering, gh)
		}
	}
	coveredBy := func(p Project) *groupHook {
		for _, gh := range covering {
			if hasPathPrefix(p.Path, gh.path) {
				return gh
			}
		}
		return nil
	}
	var g errgroup.Group // no shared context: one project's failure does not cancel the rest
	g.SetLimit(c.cfg.Concurrency)
	done := 0
	if spec.Progress != nil {
		spec.Progress(0, len(projects))
	}
	syncOne := func(p Project) bool {
		var ch []HookChange
		var err error
		if gh := coveredBy(p); gh != nil {
			ch, err = c.syncCoveredProject(ctx, p, gh, spec, dryRun)
		} else {
			ch, err = c.syncProjectHooks(ctx, p, spec, dryRun)
		}
		mu.Lock()
		defer mu.Unlock()
		if done++; spec.Progress != nil {
			spec.Progress(done, len(projects))
		}
		changes = append(changes, ch...)
		if err != nil {
			errs = append(errs, fmt.Errorf("sync hooks of %s: %w", p.Path, err))
		}
		return err == nil
	}
	// Until this GitLab is known to keep signing tokens or not, a hook
	// without one is drift, and the first write that carries the token
	// tells: projects planned in parallel before its answer would each be
	// edited for nothing where GitLab ignores it, and which ones would
	// depend on timing. So projects go one at a time, in order, until it
	// is known (the first project tells, in practice) or one synced
	// without telling; the rest in parallel.
	rest := projects
	for len(rest) > 0 && spec.SigningToken != "" && !dryRun && !c.signingKnown.Load() {
		ok := syncOne(rest[0])
		rest = rest[1:]
		if ok {
			break
		}
	}
	for _, p := range rest {
		g.Go(func() error {
			syncOne(p)
			return nil
		})
	}
	_ = g.Wait()
	slices.SortFunc(changes, func(a, b HookChange) int {
		return cmp.Or(compareBool(b.Group, a.Group), cmp.Compare(a.Project, b.Project), cmp.Compare(a.HookID, b.HookID))
	})
	return HookReport{DryRun: dryRun, Changes: changes}, errors.Join(errs...)
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func (c *Client) syncProjectHooks(ctx context.Context, p Project, spec HookSpec, dryRun bool) ([]HookChange, error) {
	hooks, err := c.ListHooks(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return c.syncProjectHooksListed(ctx, p, hooks, spec, dryRun, "")
}

// syncProjectHooksListed plans and carries out the project's hooks from
// its listed hooks; note, if set, is added to the reasons of the kept hook.
func (c *Client) syncProjectHooksListed(ctx context.Context, p Project, hooks []Hook, spec HookSpec, dryRun bool, note string) ([]HookChange, error) {
	c.noteListedSigning(hooks, spec)
	plan := planHooks(hooks, spec, c.cfg.Now(), c.signingIgnored.Load())
	var done []HookChange
	for _, st := range plan {
		step := st.HookChange
		step.Project, step.ProjectID = p.Path, p.ID
		if note != "" && step.Action != HookDeletedDuplicate {
			step.Reasons = append(step.Reasons, note)
		}
		if !dryRun {
			switch step.Action {
			case HookCreated:
				h, err := c.AddHook(ctx, p.ID, spec)
				if err != nil {
					return done, err
				}
				step.HookID = h.ID
				c.noteSigning(&step, h, spec)
			case HookUpdated, HookReenabled:
				if st.edit {
					h, err := c.EditHook(ctx, p.ID, step.HookID, spec)
					if err != nil {
						return done, err
					}
					c.noteSigning(&step, h, spec)
				}
				if st.test {
					if err := c.reenable(ctx, projectHooks(p.ID), spec.URL, &step); err != nil {
						return done, err
					}
				}
			case HookDeletedDuplicate:
				if err := c.DeleteHook(ctx, p.ID, step.HookID); err != nil && !errors.Is(err, ErrNotFound) {
					return done, err
				}
			}
		}
		if step.Action != HookUnchanged && step.Action != HookTemporarilyDisabled {
			level := slog.LevelInfo
			if dryRun {
				level = slog.LevelDebug // the report is the plan; the log would repeat it
			}
			c.log.Log(ctx, level, "hook synced", "project", p.Path, "project_id", p.ID, "hook_id", step.HookID,
				"action", string(step.Action), "reasons", strings.Join(step.Reasons, "; "), "dry_run", dryRun)
		}
		done = append(done, step)
	}
	return done, nil
}

// noteListedSigning learns from listed hooks whether this GitLab keeps
// signing tokens, where they tell: a depsd hook reporting
// signing_token_present true keeps one; one without the field is on a
// GitLab before 19.0, which keeps none and whose hooks are therefore
// not drift for want of one. false tells nothing (a hook never given a
// token, or a GitLab that ignores it): a write's answer tells (noteSigning).
func (c *Client) noteListedSigning(hooks []Hook, spec HookSpec) {
	if spec.SigningToken == "" || c.signingKnown.Load() {
		return
	}
	for _, h := range hooks {
		if h.URL == spec.URL && (h.SigningTokenPresent == nil || *h.SigningTokenPresent) {
			c.signingKnown.Store(true)
			return
		}
	}
}

// noteSigning reads GitLab's answer to a create or edit that carried a
// signing token: when GitLab kept none (signing_token_present false or
// absent), the hook is Unsigned, and the client stops counting a missing
// signing token as drift, so that later syncs do not edit every hook
// again for a token this GitLab will not keep. Either way, whether this
// GitLab keeps signing tokens is then known.
func (c *Client) noteSigning(step *HookChange, h Hook, spec HookSpec) {
	if spec.SigningToken == "" {
		return
	}
	defer c.signingKnown.Store(true)
	if h.SigningTokenPresent != nil && *h.SigningTokenPresent {
		step.Unsigned = false
		return
	}
	step.Unsigned = true
	if !slices.Contains(step.Reasons, signingIgnoredReason) {
		step.Reasons = append(step.Reasons, signingIgnoredReason)
	}
	if !c.signingIgnored.Swap(true) {
		c.log.Warn("GitLab ignores the webhook signing token: deliveries are not signed", "reason", signingIgnoredReason)
	}
}

// reenable sends a test delivery to a permanently disabled hook and
// reads it back: step becomes HookReenabled if GitLab now runs the hook,
// HookStillDisabled (with the reason) if not. A failed delivery is not an
// error; failing API calls are.
func (c *Client) reenable(ctx context.Context, o hookOwner, url string, step *HookChange) error {
	failure := ""
	if err := c.testHook(ctx, o, step.HookID); err != nil {
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
			return err
		}
		// 422: GitLab made the delivery and the receiver did not answer 2xx.
		failure = ae.Message
	}
	hooks, err := c.listHooks(ctx, o)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(hooks, func(h Hook) bool { return h.ID == step.HookID })
	if i < 0 {
		return fmt.Errorf("hook %d of %s: %w after the test delivery", step.HookID, o.name, ErrNotFound)
	}
	if !hooks[i].Disabled(c.cfg.Now()) {
		step.Action = HookReenabled
		step.Reasons = append(step.Reasons, "test delivery succeeded")
		return nil
	}
	reason := "GitLab keeps it disabled: the test delivery to " + url + " failed"
	if failure != "" {
		reason += " (" + failure + ")"
	}
	step.Action = HookStillDisabled
	step.Reasons = append(step.Reasons, reason)
	return nil
}

// hookStep is one planned change and how to carry it out.
type hookStep struct {
	HookChange
	edit bool // PUT the hook (drift)
	test bool // send a test delivery to re-enable it (permanently disabled)
}

// planHooks decides, from a project's hooks, what to do so that exactly one
// correct hook with spec.URL remains. Creates and edits come before
// deletions so the project is never left without a hook.
//
// signingIgnored says this GitLab was seen ignoring signing_token: a hook
// without one is then not drift.
func planHooks(hooks []Hook, spec HookSpec, now time.Time, signingIgnored bool) []hookStep {
	var mine []Hook
	for _, h := range hooks {
		if h.URL == spec.URL {
			mine = append(mine, h)
		}
	}
	if len(mine) == 0 {
		return []hookStep{{HookChange: HookChange{Action: HookCreated, Reasons: []string{"no hook with URL " + spec.URL}}}}
	}
	slices.SortFunc(mine, func(a, b Hook) int { return cmp.Compare(a.ID, b.ID) })
	keep := mine[0]
	drift := hookDrift(keep, spec, signingIgnored)
	// Unsigned until a write says otherwise: GitLab does not report a
	// signing token (before 19.0), or keeps none although this GitLab was
	// seen ignoring it.
	unsigned := spec.SigningToken != "" && (keep.SigningTokenPresent == nil || (!*keep.SigningTokenPresent && signingIgnored))
	st := hookStep{HookChange: HookChange{HookID: keep.ID, Action: HookUnchanged, Unsigned: unsigned}, edit: len(drift) > 0}
	switch {
	case keep.AlertStatus == "disabled":
		// Only a successful delivery re-enables it: a test request.
		st.Action, st.test = HookReenabled, true
		st.Reasons = append([]string{"disabled by GitLab (disabled)"}, drift...)
	case keep.Disabled(now):
		// GitLab retries by itself at disabled_until; sending anything now
		// would only count as one more failure if the receiver is down.
		st.Action = HookTemporarilyDisabled
		if len(drift) > 0 {
			st.Action = HookUpdated
		}
		st.Reasons = append(drift, "disabled until "+keep.DisabledUntil.Format(time.RFC3339)+", GitLab retries then")
	case len(drift) > 0:
		st.Action, st.Reasons = HookUpdated, drift
	}
	plan := []hookStep{st}
	for _, dup := range mine[1:] {
		plan = append(plan, hookStep{HookChange: HookChange{HookID: dup.ID, Action: HookDeletedDuplicate, Reasons: []string{fmt.Sprintf("duplicate of hook %d", keep.ID)}}})
	}
	return plan
}

// hookDrift lists how h differs from what spec asks for.
func hookDrift(h Hook, spec HookSpec, signingIgnored bool) []string {
	var r []string
	if !h.PushEvents {
		r = append(r, "push_events off")
	}
	if !h.PipelineEvents {
		r = append(r, "pipeline_events off")
	}
	if !h.EnableSSLVerification {
		r = append(r, "SSL verification off")
	}
	if h.PushEventsBranchFilter != "" {
		r = append(r, "push branch filter set")
	}
	if len(h.OtherEvents) > 0 {
		r = append(r, "other events on: "+strings.Join(h.OtherEvents, ","))
	}
	if h.TokenPresent != nil && !*h.TokenPresent {
		r = append(r, "token not set")
	}
	if spec.SigningToken != "" && h.SigningTokenPresent != nil && !*h.SigningTokenPresent && !signingIgnored {
		r = append(r, "signing token not set")
	}
	if spec.RotateToken {
		r = append(r, "token rotation requested")
	}
	return r
}
