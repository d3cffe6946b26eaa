package chain

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// The validations' side of the engine's transactions (premerge.go): a
// merge request pipeline's events, a validation starting, its members'
// builds, calling it off. What needs GitLab or a registry is in
// validationrun.go.

// premerge returns the engine's premerge options (nil: validations off).
func (e *Engine) premerge() *PremergeOptions { return e.cfg.Premerge }

// NotifyValidations wakes RunValidations: a candidate came, a member's
// validation image is to be read, a validation was called off. It never
// blocks.
func (e *Engine) NotifyValidations() { wake(e.validateC) }

// isCandidate reports whether ev is of a pipeline whose image is a
// candidate, never a release: a merge request pipeline.
func isCandidate(ev PipelineEvent) bool {
	return ev.Source == SourceMergeRequest || ev.MergeRequest != nil
}

// applyCandidate applies an event of a merge request pipeline of project
// p (isCandidate) to what is kept of its merge request: a newer pipeline
// than the one validated (a push) calls the running validation off, and
// its success makes a validation due (RunValidations starts it once it
// read the merge request and the candidate's digest). The same
// pipeline's later statuses (the validation's own commit status moves
// it) change nothing. It never starts, advances or unblocks a chain: a
// candidate is no release.
func (t *txn) applyCandidate(ev PipelineEvent, p Project) (string, error) {
	opts := t.e.premerge()
	if opts == nil || !opts.Rules.Covers(p.Path) {
		return "ignored: merge request pipeline (premerge does not cover the project)", nil
	}
	ref := ev.MergeRequest
	if ref == nil || ref.IID == 0 {
		return "ignored: merge request pipeline without its merge request", nil
	}
	node, ok := eventNode(p, ref.TargetBranch, false, t.e.cfg.Refs)
	if !ok {
		return fmt.Sprintf("ignored: the merge request targets %s, which no node follows", ref.TargetBranch), nil
	}
	v, found, err := t.tx.MRValidation(t.ctx, p.ID, ref.IID)
	if err != nil {
		return "", err
	}
	if !found {
		v = MRValidation{ProjectID: p.ID, IID: ref.IID, State: MROpened, CreatedAt: t.now, NextCheckAt: t.now}
	}
	if v.State != MROpened {
		return fmt.Sprintf("ignored: merge request !%d is %s", ref.IID, v.State), nil
	}
	v.Project = node
	v.Title, v.URL = cmp.Or(ref.Title, v.Title), cmp.Or(ref.URL, v.URL)
	v.SourceBranch, v.TargetBranch = cmp.Or(ref.SourceBranch, v.SourceBranch), ref.TargetBranch
	outcome := "noted: merge request pipeline"
	switch {
	case ev.PipelineID < v.PipelineID:
		return "ignored: an older pipeline of the merge request", nil
	case ev.PipelineID > v.PipelineID:
		// A push, or the pipeline run again: what was validated is not
		// the merge request's head any more.
		if err := t.supersede(&v, fmt.Sprintf("superseded by pipeline %d of commit %s", ev.PipelineID, shortSHA(ev.SHA))); err != nil {
			return "", err
		}
		v.PipelineID, v.PipelineURL, v.HeadSHA, v.StartDue = ev.PipelineID, ev.URL, ev.SHA, false
		v.Attempts, v.LastError = 0, ""
	case v.startedFor(ev.PipelineID) || v.StartDue:
		// The validation's own commit status moves the pipeline (running
		// again, then its outcome): nothing new.
		return "ignored: the candidate's validation is under way", nil
	}
	v.PipelineStatus = ev.Status
	if classify(ev.Status) == classSuccess {
		v.StartDue, v.NextCheckAt = true, t.now
		outcome = "candidate: validation due"
		t.after = append(t.after, t.e.NotifyValidations)
	}
	if err := t.saveMR(v); err != nil {
		return "", err
	}
	return outcome, nil
}

// queueBranchCandidate records a success of a branch no node follows, in
// a project premerge covers: its merge requests (those whose source the
// branch is) are looked up by RunValidations. Other statuses, and
// projects premerge does not cover, are ignored.
func (t *txn) queueBranchCandidate(ev PipelineEvent, p Project) (string, error) {
	opts := t.e.premerge()
	if opts == nil || !opts.Rules.Covers(p.Path) || ev.Tag {
		return "ignored: not a followed branch", nil
	}
	if classify(ev.Status) != classSuccess {
		return "ignored: a branch pipeline that did not succeed", nil
	}
	err := t.tx.QueueBranchCandidate(t.ctx, BranchCandidate{ProjectID: p.ID, Project: p.Path,
		Branch: strings.TrimPrefix(ev.Ref, "refs/heads/"), SHA: ev.SHA, PipelineID: ev.PipelineID, PipelineURL: ev.URL, QueuedAt: t.now})
	if err != nil {
		return "", err
	}
	t.after = append(t.after, t.e.NotifyValidations)
	return "candidate: looking for its merge request", nil
}

// startedFor reports whether v's current validation was started for
// pipeline id.
func (v MRValidation) startedFor(id int64) bool { return v.ChainID != 0 && v.Validated == id }

// supersede calls off the validation v runs, if any, for why (a push, the
// merge request merged or closed).
func (t *txn) supersede(v *MRValidation, why string) error {
	if v.ChainID == 0 {
		return nil
	}
	c, err := t.chainByID(v.ChainID)
	if err != nil || c == nil || !c.State.Active() || c.Validation == nil || c.Validation.Canceled != "" {
		return err
	}
	return t.cancelValidation(c, why)
}

// chainByID returns the chain id as this transaction holds it: an active
// one from t.chains, else the stored one (nil when there is none).
func (t *txn) chainByID(id int64) (*Chain, error) {
	for _, c := range t.chains {
		if c.ID == id {
			return c, nil
		}
	}
	c, err := t.tx.Chain(t.ctx, id)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read chain %d: %w", id, err)
	}
	return c, nil
}

// cancelValidation calls off validation c for why: members that did not
// start end canceled (an unsent action is withdrawn), and the pipelines
// that run are canceled on GitLab by RunValidations, their members
// ending canceled with them; the chain ends canceled once none is left
// (updateState).
func (t *txn) cancelValidation(c *Chain, why string) error {
	c.Validation.Canceled = why
	for _, m := range c.Members {
		if m.Project == c.Validation.root(c) {
			continue
		}
		switch {
		case m.State == Pending:
			withdrawn, err := t.withdraw(m)
			if err != nil {
				return err
			}
			if !withdrawn {
				continue // claimed: its pipeline is canceled once it exists
			}
		case m.State == Waiting || m.State == MemberBlocked || m.State == Verifying:
		default:
			continue
		}
		c.changed(m)
		m.State, m.Why, m.Requeued = Canceled, why, false
		m.FinishedAt = t.now
	}
	c.touch(t.now)
	id := c.ID
	t.after = append(t.after, func() {
		t.e.log.Info("validation called off", "chain_id", id, "why", why)
		t.e.NotifyValidations()
	})
	return t.settle(c)
}

// root is the upstream's node: the validation chain's one root.
func (v *Validation) root(c *Chain) string {
	if len(c.Roots) > 0 {
		return c.Roots[0]
	}
	return ""
}

// validationState is the state of validation c: canceled once called
// off and nothing runs any more (running while its pipelines are being
// canceled), finished when no member has work ahead, else running. A
// failed member does not block the chain: its answer is final.
func (c *Chain) validationState(b *book) State {
	if c.Validation != nil && c.Validation.Canceled != "" {
		for _, m := range c.Members {
			if m.State.Building() {
				return Running
			}
		}
		return ChainCanceled
	}
	if b.unfinished > 0 {
		return Running
	}
	return Finished
}

// startValidation starts the validation of v's candidate (its pipeline
// succeeded, RunValidations read the merge request and digest): a chain
// of kind KindValidation whose root is the upstream's node, succeeded
// with the merge request pipeline, and whose members are its dependents
// (rule.Depth). cannot are the dependents known unable to validate, with
// why: they are skipped. It returns the chain, or nil when the upstream
// has no dependent (nothing to validate: nothing is shown on the merge
// request).
func (t *txn) startValidation(v *MRValidation, rule PremergeRule, candidate, digest string, cannot map[string]string) (*Chain, error) {
	root := v.Project
	var members []string
	switch rule.Depth {
	case DepthAll:
		for _, w := range t.g.Waves(root) {
			for _, p := range w {
				if p != root {
					members = append(members, p)
				}
			}
		}
	default:
		cyc := t.cycles()
		for _, d := range t.g.Downstream(root) {
			if _, onCycle := cyc[d]; !onCycle {
				members = append(members, d)
			}
		}
	}
	if len(members) == 0 {
		return nil, nil
	}
	c, err := t.newChain(Full)
	if err != nil {
		return nil, err
	}
	c.Kind = KindValidation
	c.Validation = &Validation{
		ProjectID: v.ProjectID, IID: v.IID, Title: v.Title, URL: v.URL, SourceBranch: v.SourceBranch,
		TargetBranch: v.TargetBranch, SHA: v.HeadSHA, PipelineID: v.PipelineID, PipelineURL: v.PipelineURL,
		Candidate: candidate, Digest: digest, Depth: rule.Depth,
	}
	c.Roots = []string{root}
	c.Reasons = []Reason{{Kind: ReasonMergeRequest, Project: root, PipelineID: v.PipelineID, At: t.now,
		Detail: fmt.Sprintf("merge request !%d: pipeline %d pushed the candidate %s", v.IID, v.PipelineID, candidate)}}
	c.add(&Member{Project: root, ProjectID: v.ProjectID, State: Success, PipelineID: v.PipelineID, PipelineURL: v.PipelineURL,
		Why: "the candidate of merge request !" + formatID(v.IID), Images: map[string]string{candidate: digest},
		TriggeredAt: t.now, FinishedAt: t.now})
	in := map[string]bool{root: true}
	for _, p := range members {
		in[p] = true
	}
	for _, p := range members {
		m := &Member{Project: p, State: Waiting}
		if why, ok := cannot[p]; ok {
			m.State, m.Why, m.FinishedAt = MemberSkipped, "cannot validate: "+why, t.now
		}
		c.add(m)
	}
	for _, m := range c.Members {
		if m.Project == root {
			continue
		}
		m.Upstreams = slices.DeleteFunc(t.g.Upstream(m.Project), func(u string) bool { return !in[u] })
	}
	c.reshaped()
	c.touch(t.now)
	if err := t.settle(c); err != nil {
		return nil, err
	}
	if err := t.tx.AddChainStatus(t.ctx, ChainStatus{PipelineID: v.PipelineID, Name: ValidationStatusName,
		ProjectID: v.ProjectID, Project: root, SHA: v.HeadSHA, ChainID: c.ID, CreatedAt: t.now, NextSendAt: t.now}); err != nil {
		return nil, fmt.Errorf("record the status of merge request !%d: %w", v.IID, err)
	}
	v.ChainID, v.Validated, v.Chains = c.ID, v.PipelineID, append(v.Chains, c.ID)
	id, iid := c.ID, v.IID
	t.after = append(t.after, func() {
		t.e.log.Info("validation started", "chain_id", id, "project", root, "merge_request", iid, "members", len(members))
	})
	return c, nil
}

// enqueueValidation writes the action that builds member m of validation
// c on its in-chain upstreams' candidates, and reports whether it could;
// a member that cannot be built so is skipped ("cannot validate", with
// what its project needs).
func (t *txn) enqueueValidation(c *Chain, m *Member) (bool, error) {
	skip := func(why string) (bool, error) {
		m.State, m.Why, m.FinishedAt, m.ActionID = MemberSkipped, "cannot validate: "+why, t.now, ""
		c.changed(m)
		c.touch(t.now)
		return false, nil
	}
	p, ref, ok, err := t.node(m.Project)
	if err != nil {
		return false, err
	}
	if !ok {
		m.State, m.Why, m.FinishedAt = Failed, "project is no longer in scope (or no longer has this ref)", t.now
		c.changed(m)
		c.touch(t.now)
		return false, nil
	}
	if p.Ident == IdentNone {
		return skip(CannotValidateSnippet)
	}
	var contexts []string
	for _, u := range m.Upstreams {
		um := c.member(u)
		if um == nil || um.State != Success {
			continue
		}
		image, digest := onlyImage(um.Images)
		if digest == "" {
			return skip(fmt.Sprintf("%s pushed no validation image to build on (does its CI push depsd_validate_tag?)", u))
		}
		refs, err := t.tx.UpstreamRefs(t.ctx, m.Project, u)
		if err != nil {
			return false, err
		}
		names, why := buildContextNames(refs)
		if len(names) == 0 {
			return skip(fmt.Sprintf("its files name %s in no way a build can replace (%s)", u, why))
		}
		for _, n := range names {
			contexts = append(contexts, n+"=docker-image://"+repositoryOf(image)+"@"+digest)
		}
	}
	if len(contexts) == 0 {
		return skip("none of its upstreams in this validation has an image to build on")
	}
	req := &ValidateRequest{BuildContexts: strings.Join(contexts, " ")}
	if c.Validation.Depth == DepthAll && c.hasDependents(m) {
		req.Tag = ValidateTag(c.ID)
	}
	a := Action{
		ID: newActionID(), Kind: ActionValidate, Validate: req, ChainID: c.ID, Project: m.Project, ProjectID: p.ID,
		Ref: ref, Upstreams: slices.Clone(m.Upstreams), State: ActionPending, NextAttemptAt: t.now, CreatedAt: t.now,
		Ident: p.Ident,
	}
	return t.queueBuild(c, m, p.ID, &a, "validation build queued")
}

// CannotValidateSnippet says what a project needs for depsd to validate
// it: the build component's validation inputs, declared in its CI
// configuration (or pipeline variables, which the component reads).
const CannotValidateSnippet = "its pipelines take neither variables nor the validation inputs; declare them in its .gitlab-ci.yml " +
	"(spec: inputs: depsd_validate (boolean), depsd_build_contexts, depsd_validate_tag, passed on to the build " +
	"component; docs/build-component.md)"

// hasDependents reports whether m has an in-chain dependent.
func (c *Chain) hasDependents(m *Member) bool {
	for _, d := range c.Members {
		if slices.Contains(d.Upstreams, m.Project) {
			return true
		}
	}
	return false
}

// onlyImage is the one image of a member's Images (a validation's
// members have one: the candidate, or the validation image), "" when
// there is none.
func onlyImage(images map[string]string) (image, digest string) {
	for _, k := range sortedKeys(images) {
		return k, images[k]
	}
	return "", ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var argRef = regexp.MustCompile(`^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$`)

// buildContextNames says how a validation build replaces an upstream that
// its files name as refs: each reference as its FROM (or COPY --from, or
// RUN --mount from) writes it, or the ARG a FROM names alone (FROM
// ${RUBY_IMAGE}) by its bare name. A .gitlab-deps line names no image a
// build uses, and a reference mixing an ARG with text (FROM
// registry/${NAME}:3) cannot be replaced by either: why says so when no
// name is left.
func buildContextNames(refs []deps.Dependency) (names []string, why string) {
	var reasons []string
	for _, d := range refs {
		switch {
		case d.Kind == deps.KindGitLabDeps:
			reasons = append(reasons, "a .gitlab-deps line, which no build reads")
		case argRef.MatchString(d.Ref):
			names = append(names, argRef.FindStringSubmatch(d.Ref)[1])
		case strings.Contains(d.Ref, "$"):
			reasons = append(reasons, fmt.Sprintf("%s mixes an ARG with text", d.Ref))
		case d.Ref != "":
			names = append(names, d.Ref)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(reasons) == 0 {
		reasons = append(reasons, "no dependency recorded")
	}
	return names, strings.Join(reasons, "; ")
}

// validatedAfter is verifyAfter for a member m of validation c whose
// build succeeded: one whose in-chain dependents build on its validation
// image (depth all) waits in Verifying until RunValidations read that
// image's digest; any other is done.
func (t *txn) validatedAfter(c *Chain, m *Member) error {
	if m.State != Success || c.Validation.Depth != DepthAll || !c.hasDependents(m) || c.Validation.Canceled != "" {
		return nil
	}
	m.State, m.Why = Verifying, fmt.Sprintf("pipeline %d succeeded; reading its validation image", m.PipelineID)
	c.touch(t.now)
	t.after = append(t.after, t.e.NotifyValidations)
	return nil
}

// validationImageRead applies the digest RunValidations read of member
// node's validation image in chain chainID (image, digest; "" and why
// when it could not be read): the member succeeds with it, and its
// dependents build on it.
func (t *txn) validationImageRead(chainID int64, node string, pipelineID int64, image, digest, why string) error {
	var c *Chain
	for _, x := range t.chains {
		if x.ID == chainID && x.State.Active() {
			c = x
		}
	}
	if c == nil {
		return nil
	}
	m := c.member(node)
	if m == nil || m.State != Verifying || m.PipelineID != pipelineID {
		return nil
	}
	c.changed(m)
	m.State = Success
	if digest != "" {
		m.Images, m.Why = map[string]string{image: digest}, ""
	} else {
		m.Images, m.Why = nil, "its validation image was not read: "+why
	}
	c.touch(t.now)
	return t.settle(c)
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
