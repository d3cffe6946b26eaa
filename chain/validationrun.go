package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// PremergeGitLab is the part of the GitLab API validations use (premerge.go);
// *gitlab.Client implements it. Calls may be concurrent. CreateMergeRequestNote
// is not retried after a 5xx (the note may exist): the sender reads the
// notes back before it creates one again.
type PremergeGitLab interface {
	StatusGitLab
	GetMergeRequest(ctx context.Context, projectID, iid int64) (gitlab.MergeRequest, error)
	ListMergeRequests(ctx context.Context, projectID int64, f gitlab.MergeRequestFilter) ([]gitlab.MergeRequest, error)
	CreateMergeRequestNote(ctx context.Context, projectID, iid int64, body string) (gitlab.Note, error)
	UpdateMergeRequestNote(ctx context.Context, projectID, iid, noteID int64, body string) (gitlab.Note, error)
	ListMergeRequestNotes(ctx context.Context, projectID, iid int64) ([]gitlab.Note, error)
	CancelPipeline(ctx context.Context, projectID, pipelineID int64) (gitlab.Pipeline, error)
	ListRegistryRepositories(ctx context.Context, projectID int64) ([]gitlab.RegistryRepository, error)
	DeleteRegistryTag(ctx context.Context, projectID, repositoryID int64, tag string) error
	ReadFile(ctx context.Context, projectID int64, path, ref string) (gitlab.File, error)
}

// CandidateRegistry reads the digest an image tag (host/path:tag) points
// at; the daemon's registry client implements it, within the registries
// its policy allows. Calls may be concurrent.
type CandidateRegistry interface {
	Digest(ctx context.Context, image string) (string, error)
}

// PremergeOptions turn validations on (Config.Premerge).
type PremergeOptions struct {
	Rules    PremergeRules     // which projects' merge requests, how deep
	GitLab   PremergeGitLab    // required
	Registry CandidateRegistry // required: the candidates' digests
	// Interval is how often an open merge request is read (merged,
	// closed, pushed to) and a failed step tried again. Default 1 minute.
	Interval time.Duration
	// NoteInterval is the least time between two edits of a merge
	// request's note (the changes in between are one edit). Default 5 s.
	NoteInterval time.Duration
	// URL, when set, is the link of a validation's page (the commit
	// status's target and the note's link).
	URL func(chainID int64) string
}

// maxStartAttempts is how many times a candidate that cannot be read is
// tried before its validation is given up (said so on the merge
// request).
const maxStartAttempts = 5

// maxImageReads is how many times a member's validation image is read
// before its dependents are told there is none.
const maxImageReads = 3

// CIConfigFile is the CI configuration GitLab reads by default.
const CIConfigFile = ".gitlab-ci.yml"

// RunValidations does the validations' work that needs GitLab or a
// registry until ctx ends (ValidatePending): at once when woken
// (NotifyValidations), when the next merge request's work falls due, and
// every PollInterval. The daemon runs it on the leader. Errors are
// logged and retried.
func (e *Engine) RunValidations(ctx context.Context) error {
	if e.premerge() == nil {
		return nil
	}
	for {
		if err := e.ValidatePending(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("validation work failed", "err", err)
		}
		wait := e.cfg.PollInterval
		err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
			next, ok, err := tx.NextMRValidationDue(ctx)
			if ok {
				wait = min(wait, max(next.Sub(e.now()), 50*time.Millisecond))
			}
			return err
		})
		if err != nil && ctx.Err() == nil {
			e.log.Warn("validation work failed", "err", err)
		}
		if !e.sleep(ctx, e.validateC, wait) {
			return nil
		}
	}
}

// ValidatePending does one round of the validations' work:
//   - the successful pipelines of branches that may be merge requests'
//     sources are matched with their open merge requests;
//   - a candidate whose validation is due is read: the merge request
//     (still open, at the candidate's commit, with the label premerge
//     asks for), the candidate's digest, and the CI configuration of
//     dependents that take variables (a validation build must not
//     publish: one that reads neither DEPSD_VALIDATE nor the build
//     component cannot validate); then the validation starts;
//   - open merge requests are read every Interval: merged or closed, a
//     validation running is called off and the tags the validations
//     pushed are deleted (where the token may); pushed to, the
//     validation of the older commit is called off;
//   - a member whose dependents build on its validation image (depth
//     all) has that image's digest read;
//   - the pipelines of validations called off are canceled on GitLab;
//   - the merge request notes due are written.
//
// It returns the first error; GitLab's and the registry's errors of one
// merge request are recorded on it and tried again later.
func (e *Engine) ValidatePending(ctx context.Context) error {
	opts := e.premerge()
	if opts == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	keep(e.branchCandidates(ctx))
	var due []MRValidation
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		due, err = tx.MRValidations(ctx, MRFilter{Due: true, Now: e.now(), Limit: 1000})
		return err
	})
	if err != nil {
		return fmt.Errorf("validations: read the merge requests due: %w", err)
	}
	now := e.now()
	for _, v := range due {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !v.NextCheckAt.After(now) {
			switch {
			case v.StartDue && v.State == MROpened:
				keep(e.startDue(ctx, v))
			case v.State == MROpened:
				keep(e.checkMR(ctx, v))
			case v.CleanupPending():
				keep(e.cleanup(ctx, v))
			}
		}
	}
	keep(e.validationChains(ctx))
	// Notes last: what the steps above changed is in them.
	err = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		due, err = tx.MRValidations(ctx, MRFilter{Due: true, Now: e.now(), Limit: 1000})
		return err
	})
	if err != nil {
		return fmt.Errorf("validations: read the notes due: %w", err)
	}
	for _, v := range due {
		// Due, or claimed by a dead owner: sendNote looks again as it
		// claims.
		if v.Note.DoneSeq < v.Note.WantSeq && !v.Note.NextSendAt.After(e.now()) {
			keep(e.sendNote(ctx, v))
		}
	}
	return first
}

// branchCandidates looks up the open merge requests whose source is the
// branch of each queued branch candidate, at its commit, and applies the
// pipeline to each as a merge request pipeline of it.
func (e *Engine) branchCandidates(ctx context.Context) error {
	var queued []BranchCandidate
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		queued, err = tx.BranchCandidates(ctx, 100)
		return err
	})
	if err != nil || len(queued) == 0 {
		return err
	}
	gl := e.premerge().GitLab
	var first error
	for _, bc := range queued {
		mrs, err := gl.ListMergeRequests(ctx, bc.ProjectID, gitlab.MergeRequestFilter{SourceBranch: bc.Branch, State: gitlab.MergeRequestOpened})
		if err != nil {
			if first == nil {
				first = fmt.Errorf("merge requests of branch %s of %s: %w", bc.Branch, bc.Project, err)
			}
			continue
		}
		g, err := e.cfg.Graph(ctx)
		if err != nil {
			return err
		}
		err = e.update(ctx, g, func(t *txn) error {
			p, ok, err := t.project(bc.Project)
			if err != nil {
				return err
			}
			for _, mr := range mrs {
				if !ok || mr.SHA != bc.SHA {
					continue
				}
				ev := PipelineEvent{ProjectID: bc.ProjectID, Project: bc.Project, PipelineID: bc.PipelineID, Status: "success",
					Ref: bc.Branch, SHA: bc.SHA, Source: "push", URL: bc.PipelineURL, At: t.now,
					MergeRequest: &MergeRequestRef{IID: mr.IID, Title: mr.Title, URL: mr.WebURL, SourceBranch: mr.SourceBranch, TargetBranch: mr.TargetBranch}}
				if _, err := t.applyCandidate(ev, p); err != nil {
					return err
				}
			}
			return t.tx.DoneBranchCandidate(t.ctx, bc.PipelineID)
		})
		if err != nil {
			return fmt.Errorf("apply branch candidate %d of %s: %w", bc.PipelineID, bc.Project, err)
		}
	}
	return first
}

// mrGone is a merge request GitLab no longer has: taken for closed.
func mrOf(ctx context.Context, gl PremergeGitLab, v MRValidation) (gitlab.MergeRequest, error) {
	mr, err := gl.GetMergeRequest(ctx, v.ProjectID, v.IID)
	if errors.Is(err, gitlab.ErrNotFound) {
		return gitlab.MergeRequest{IID: v.IID, State: gitlab.MergeRequestClosed}, nil
	}
	return mr, err
}

// startDue starts v's validation if its merge request still wants it.
func (e *Engine) startDue(ctx context.Context, v MRValidation) error {
	opts := e.premerge()
	rule, covered := opts.Rules.For(v.Project)
	if !covered {
		return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
			cur.StartDue, cur.LastError = false, "premerge no longer covers the project"
			return nil
		})
	}
	mr, err := mrOf(ctx, opts.GitLab, v)
	if err != nil {
		return e.startFailed(ctx, v, fmt.Errorf("read merge request !%d: %w", v.IID, err))
	}
	if mr.State == gitlab.MergeRequestMerged || mr.State == gitlab.MergeRequestClosed {
		return e.mrEnded(ctx, v, MRState(mr.State))
	}
	switch {
	case mr.SHA != "" && mr.SHA != v.HeadSHA:
		// Pushed to since: the newer commit's pipeline brings its own
		// candidate.
		return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
			cur.StartDue, cur.LastError = false, fmt.Sprintf("the merge request moved on to %s before its validation started", shortSHA(mr.SHA))
			return nil
		})
	case rule.Label != "" && !slices.Contains(mr.Labels, rule.Label):
		// Looked at again every Interval: the label may come.
		return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
			cur.LastError = fmt.Sprintf("not validated: it does not carry the label %s", rule.Label)
			cur.NextCheckAt = t.now.Add(opts.Interval)
			return nil
		})
	}
	var prefix string
	err = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		p, _, err := tx.Project(ctx, deps.NodeProject(v.Project))
		prefix = p.RegistryPrefix
		return err
	})
	if err != nil {
		return err
	}
	candidate, err := ExpandCandidate(rule.Candidate, prefix, v.IID)
	if err != nil {
		return e.startGiveUp(ctx, v, fmt.Sprintf("no candidate to read: %v", err))
	}
	digest, err := opts.Registry.Digest(ctx, candidate)
	if err != nil {
		return e.startFailed(ctx, v, fmt.Errorf("read the candidate %s: %w", candidate, err))
	}
	// The candidate read is this commit's only if the merge request is
	// still there: a push moves the head before its pipeline pushes.
	if mr, err = mrOf(ctx, opts.GitLab, v); err != nil {
		return e.startFailed(ctx, v, fmt.Errorf("read merge request !%d: %w", v.IID, err))
	}
	if mr.SHA != "" && mr.SHA != v.HeadSHA {
		return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
			cur.StartDue, cur.LastError = false, fmt.Sprintf("the merge request moved on to %s while its candidate was read", shortSHA(mr.SHA))
			return nil
		})
	}
	g, err := e.cfg.Graph(ctx)
	if err != nil {
		return err
	}
	cannot := e.cannotValidate(ctx, validationMembers(g, v.Project, rule.Depth))
	err = e.update(ctx, g, func(t *txn) error {
		cur, ok, err := t.tx.MRValidation(t.ctx, v.ProjectID, v.IID)
		if err != nil || !ok || !cur.StartDue || cur.PipelineID != v.PipelineID || cur.State != MROpened {
			return err // moved on meanwhile
		}
		c, err := t.startValidation(&cur, rule, candidate, digest, cannot)
		if err != nil {
			return err
		}
		cur.StartDue, cur.Attempts, cur.LastError = false, 0, ""
		if c == nil {
			cur.LastError = "nothing depends on " + cur.Project + ": nothing to validate"
		}
		cur.NextCheckAt = t.now.Add(opts.Interval)
		return t.saveMR(cur)
	})
	if err != nil {
		return fmt.Errorf("start the validation of merge request !%d of %s: %w", v.IID, v.Project, err)
	}
	return nil
}

// validationMembers are the nodes a validation of root builds at depth.
func validationMembers(g *deps.Graph, root string, depth ValidationDepth) []string {
	var out []string
	if depth == DepthAll {
		for _, w := range g.Waves(root) {
			for _, p := range w {
				if p != root {
					out = append(out, p)
				}
			}
		}
		return out
	}
	return g.Downstream(root)
}

// cannotValidate reads the CI configuration of the members whose
// pipelines take variables: a validation build is told what it is by
// DEPSD_VALIDATE, and one whose configuration reads neither that nor the
// build component would build on its usual base and publish. Those are
// returned with why. A configuration that cannot be read (other than
// absent) decides nothing.
func (e *Engine) cannotValidate(ctx context.Context, members []string) map[string]string {
	gl := e.premerge().GitLab
	out := map[string]string{}
	for _, node := range members {
		var p Project
		var ref string
		var ok bool
		err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
			var err error
			p, ok, err = tx.Project(ctx, deps.NodeProject(node))
			if ok {
				ref, ok = buildRef(node, p, e.cfg.Refs)
			}
			return err
		})
		if err != nil || !ok || p.Ident == IdentInputs || p.Ident == IdentNone {
			continue // the create decides (inputs refused), or the enqueue (none)
		}
		f, err := gl.ReadFile(ctx, p.ID, CIConfigFile, ref)
		switch {
		case errors.Is(err, gitlab.ErrNotFound):
			out[node] = "it has no " + CIConfigFile
		case err != nil:
		case !readsValidation(f.Content):
			out[node] = "its " + CIConfigFile + " reads neither DEPSD_VALIDATE nor the build component, so a validation build of it would publish; " +
				"include the build component (docs/build-component.md) or honour DEPSD_VALIDATE, DEPSD_BUILD_CONTEXTS and DEPSD_VALIDATE_TAG"
		}
	}
	return out
}

// readsValidation reports whether a CI configuration handles validation
// builds: it names depsd_validate (the input, or the DEPSD_VALIDATE
// variable) or includes the build component.
func readsValidation(content []byte) bool {
	s := strings.ToLower(string(content))
	return strings.Contains(s, "depsd_validate") || strings.Contains(s, "/image-build@")
}

// startFailed records a start that failed for a reason that may pass,
// tried again after a backoff; after maxStartAttempts it is given up.
func (e *Engine) startFailed(ctx context.Context, v MRValidation, cause error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e.log.Warn("validation not started; will retry", "project", v.Project, "merge_request", v.IID, "err", cause)
	if v.Attempts+1 >= maxStartAttempts {
		return e.startGiveUp(ctx, v, cause.Error())
	}
	return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
		cur.Attempts++
		cur.LastError = cause.Error()
		cur.NextCheckAt = t.now.Add(min(e.backoff(cur.Attempts), e.premerge().Interval))
		return nil
	})
}

// startGiveUp gives v's validation up, saying why on the merge request.
func (e *Engine) startGiveUp(ctx context.Context, v MRValidation, why string) error {
	e.log.Error("validation given up", "project", v.Project, "merge_request", v.IID, "why", why)
	return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
		cur.StartDue, cur.Attempts, cur.LastError = false, 0, "not validated: "+why
		cur.NextCheckAt = t.now.Add(e.premerge().Interval)
		return nil
	})
}

// updateMR changes what is kept of v's merge request in a transaction of
// its own (nothing when it is gone), and saves it with its note's want.
func (e *Engine) updateMR(ctx context.Context, v MRValidation, fn func(*txn, *MRValidation) error) error {
	err := e.update(ctx, nil, func(t *txn) error {
		cur, ok, err := t.tx.MRValidation(t.ctx, v.ProjectID, v.IID)
		if err != nil || !ok {
			return err
		}
		if err := fn(t, &cur); err != nil {
			return err
		}
		return t.saveMR(cur)
	})
	if err != nil {
		return fmt.Errorf("merge request !%d of %s: %w", v.IID, v.Project, err)
	}
	return nil
}

// checkMR reads an open merge request: merged or closed, its validation
// ends (mrEnded); pushed to past the commit validated, that validation is
// called off (the new commit's pipeline brings its candidate).
func (e *Engine) checkMR(ctx context.Context, v MRValidation) error {
	opts := e.premerge()
	mr, err := mrOf(ctx, opts.GitLab, v)
	if err != nil {
		return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
			cur.LastError = fmt.Sprintf("read merge request !%d: %v", v.IID, err)
			cur.NextCheckAt = t.now.Add(opts.Interval)
			return nil
		})
	}
	if mr.State == gitlab.MergeRequestMerged || mr.State == gitlab.MergeRequestClosed {
		return e.mrEnded(ctx, v, MRState(mr.State))
	}
	return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
		cur.NextCheckAt = t.now.Add(opts.Interval)
		if mr.SHA != "" && cur.HeadSHA != "" && mr.SHA != cur.HeadSHA {
			if err := t.supersede(cur, "superseded by a push of commit "+shortSHA(mr.SHA)); err != nil {
				return err
			}
			cur.HeadSHA, cur.StartDue = mr.SHA, false
		}
		if mr.Title != "" {
			cur.Title = mr.Title
		}
		return nil
	})
}

// mrEnded records that v's merge request was merged or closed: its
// validation running is called off, and the tags its validations pushed
// (the candidates, the members' validation images) are to be deleted.
func (e *Engine) mrEnded(ctx context.Context, v MRValidation, state MRState) error {
	return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
		if cur.State != MROpened {
			return nil
		}
		cur.State, cur.StartDue = state, false
		if err := t.supersede(cur, fmt.Sprintf("merge request !%d was %s", cur.IID, state)); err != nil {
			return err
		}
		tags, err := t.pushedTags(*cur)
		if err != nil {
			return err
		}
		cur.Cleanup, cur.NextCheckAt = tags, t.now
		id, iid := cur.Project, cur.IID
		t.after = append(t.after, func() {
			e.log.Info("merge request ended; its validation tags are deleted", "project", id, "merge_request", iid,
				"state", string(state), "tags", len(tags))
		})
		return nil
	})
}

// pushedTags are the tags v's validations made pushed: each candidate
// (the merge request's), and the validation images of members whose
// dependents built on them (depth all).
func (t *txn) pushedTags(v MRValidation) ([]TagCleanup, error) {
	var out []TagCleanup
	seen := map[string]bool{}
	add := func(projectID int64, project, image string) {
		if image == "" || seen[image] {
			return
		}
		seen[image] = true
		out = append(out, TagCleanup{ProjectID: projectID, Project: project, Image: image})
	}
	for _, id := range v.Chains {
		c, err := t.chainByID(id)
		if err != nil {
			return nil, err
		}
		if c == nil || c.Validation == nil {
			continue
		}
		add(c.Validation.ProjectID, deps.NodeProject(c.Roots[0]), c.Validation.Candidate)
		if c.Validation.Depth != DepthAll {
			continue
		}
		for _, m := range c.Members {
			if m.Project == c.Roots[0] || m.Builds == 0 || !c.hasDependents(m) {
				continue
			}
			p, ok, err := t.project(deps.NodeProject(m.Project))
			if err != nil {
				return nil, err
			}
			if ok && p.RegistryPrefix != "" {
				add(p.ID, p.Path, p.RegistryPrefix+":"+ValidateTag(c.ID))
			}
		}
	}
	return out, nil
}

// cleanup deletes the tags left of v's validations through GitLab's
// registry API: one the registry no longer has is done, and so is one
// the token may not delete (said so); anything else is tried again after
// Interval.
func (e *Engine) cleanup(ctx context.Context, v MRValidation) error {
	gl := e.premerge().GitLab
	repos := map[int64][]gitlab.RegistryRepository{}
	results := map[string]TagCleanup{}
	var retry error
	for _, tc := range v.Cleanup {
		if tc.Done {
			continue
		}
		list, ok := repos[tc.ProjectID]
		if !ok {
			var err error
			if list, err = gl.ListRegistryRepositories(ctx, tc.ProjectID); err != nil && !errors.Is(err, gitlab.ErrNotFound) {
				if gitlab.IsPermanent(err) {
					tc.Done, tc.Result = true, "not deleted: "+err.Error()
					results[tc.Image] = tc
				} else if retry == nil {
					retry = err
				}
				continue
			}
			repos[tc.ProjectID] = list
		}
		repo, tag := repositoryOf(tc.Image), strings.TrimPrefix(tc.Image, repositoryOf(tc.Image)+":")
		i := slices.IndexFunc(list, func(r gitlab.RegistryRepository) bool { return strings.EqualFold(r.Location, repo) })
		if i < 0 {
			tc.Done, tc.Result = true, "not found"
			results[tc.Image] = tc
			continue
		}
		err := gl.DeleteRegistryTag(ctx, tc.ProjectID, list[i].ID, tag)
		switch {
		case err == nil:
			tc.Done, tc.Result = true, "deleted"
		case errors.Is(err, gitlab.ErrNotFound):
			tc.Done, tc.Result = true, "not found"
		case errors.Is(err, gitlab.ErrForbidden) || errors.Is(err, gitlab.ErrUnauthorized):
			tc.Done, tc.Result = true, "not deleted: the token may not delete tags of "+tc.Project
		case gitlab.IsPermanent(err):
			tc.Done, tc.Result = true, "not deleted: "+err.Error()
		default:
			if retry == nil {
				retry = err
			}
			continue
		}
		results[tc.Image] = tc
	}
	return e.updateMR(ctx, v, func(t *txn, cur *MRValidation) error {
		for i, tc := range cur.Cleanup {
			if r, ok := results[tc.Image]; ok {
				cur.Cleanup[i] = r
			}
		}
		cur.LastError = ""
		if retry != nil {
			cur.LastError = "deleting tags: " + retry.Error()
		}
		cur.NextCheckAt = t.now.Add(e.premerge().Interval)
		return nil
	})
}

// validationChains reads the validation images of members whose
// dependents wait for them, and cancels the pipelines of validations
// called off.
func (e *Engine) validationChains(ctx context.Context) error {
	type read struct {
		chainID, pipelineID, projectID int64
		node                           string
	}
	type stop struct {
		node, actionID        string
		projectID, pipelineID int64
	}
	var reads []read
	var stops []stop
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		chains, err := tx.ActiveChains(ctx)
		for _, c := range chains {
			if !c.IsValidation() || c.Validation == nil {
				continue
			}
			for _, m := range c.Members {
				switch {
				case m.State == Verifying && c.Validation.Canceled == "":
					reads = append(reads, read{c.ID, m.PipelineID, m.ProjectID, m.Project})
				case c.Validation.Canceled != "" && (m.State == Triggered || m.State == MemberRunning) && m.PipelineID != 0:
					stops = append(stops, stop{m.Project, m.ActionID, m.ProjectID, m.PipelineID})
				}
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("validations: read the chains: %w", err)
	}
	opts := e.premerge()
	var first error
	for _, r := range reads {
		var prefix string
		err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
			p, _, err := tx.Project(ctx, deps.NodeProject(r.node))
			prefix = p.RegistryPrefix
			return err
		})
		if err != nil {
			return err
		}
		image := prefix + ":" + ValidateTag(r.chainID)
		digest, rerr := "", errors.New("the project has no container registry")
		if prefix != "" {
			digest, rerr = opts.Registry.Digest(ctx, image)
		}
		why := ""
		if rerr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			key := fmt.Sprintf("%d/%s/%d", r.chainID, r.node, r.pipelineID)
			e.imageReadsMu.Lock()
			if e.imageReads == nil {
				e.imageReads = map[string]int{}
			}
			e.imageReads[key]++
			n := e.imageReads[key]
			e.imageReadsMu.Unlock()
			if n < maxImageReads {
				e.log.Warn("validation image not read; will retry", "chain_id", r.chainID, "project", r.node, "image", image, "err", rerr)
				continue
			}
			why = rerr.Error()
		}
		g, err := e.cfg.Graph(ctx)
		if err != nil {
			return err
		}
		if err := e.update(ctx, g, func(t *txn) error {
			return t.validationImageRead(r.chainID, r.node, r.pipelineID, image, digest, why)
		}); err != nil {
			return fmt.Errorf("record the validation image of %s: %w", r.node, err)
		}
	}
	for _, s := range stops {
		p, err := opts.GitLab.CancelPipeline(ctx, s.projectID, s.pipelineID)
		if err != nil {
			if errors.Is(err, gitlab.ErrNotFound) {
				p = gitlab.Pipeline{ID: s.pipelineID, Status: "canceled"}
			} else {
				e.log.Warn("cancel a validation pipeline failed", "project", s.node, "pipeline_id", s.pipelineID, "err", err)
				if first == nil {
					first = err
				}
				continue
			}
		}
		ev := PipelineEvent{ProjectID: s.projectID, Project: s.node, PipelineID: s.pipelineID, Status: p.Status,
			Ref: p.Ref, SHA: p.SHA, Source: "api", URL: p.WebURL, At: e.now()}
		if s.actionID != "" {
			ev.Variables = map[string]string{VarActionID: s.actionID}
		}
		if ev.Ref == "" {
			ev.Ref, _ = e.nodeRef(ctx, s.node)
		}
		if _, err := e.ApplyPipelineEvent(ctx, ev); err != nil {
			return err
		}
		e.log.Info("validation pipeline canceled", "project", s.node, "pipeline_id", s.pipelineID, "status", p.Status)
	}
	return first
}
