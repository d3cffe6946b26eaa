package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// maxStatusRefusals is how many times GitLab may refuse a post of one want
// (an invalid transition, read back after each) before the sender gives it
// up: a want that GitLab keeps refusing is reported, never retried forever.
const maxStatusRefusals = 3

// SendStatuses posts the due commit statuses of chains, one at a time,
// until none is due, and returns how many posts GitLab accepted. Each
// status is claimed with a lease and marked in doubt before it is posted
// (see commitstatus.go); one in doubt is read from GitLab before it is
// posted again. It returns an error only when the store fails or ctx
// ends; GitLab's errors are recorded on the status.
func (e *Engine) SendStatuses(ctx context.Context) (int, error) {
	if e.statusGitLab() == nil {
		return 0, nil
	}
	sent := 0
	for {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		s, wasInDoubt, ok, err := e.claimStatus(ctx)
		if err != nil {
			return sent, fmt.Errorf("send commit statuses: %w", err)
		}
		if !ok {
			return sent, nil
		}
		posted, err := e.sendStatus(ctx, s, wasInDoubt)
		if err != nil {
			return sent, fmt.Errorf("send commit statuses: %w", err)
		}
		if posted {
			sent++
		}
	}
}

// claimStatus claims the status due first: its lease is this engine's,
// and it is in doubt from now on (the post may reach GitLab whatever
// happens next). wasInDoubt says whether it already was: an earlier
// post's outcome is unknown.
func (e *Engine) claimStatus(ctx context.Context) (s ChainStatus, wasInDoubt, ok bool, err error) {
	err = e.cfg.Store.UpdateChains(ctx, func(tx Tx) error {
		now := e.now()
		var err error
		s, ok, err = tx.DueChainStatus(ctx, now)
		if err != nil || !ok {
			return err
		}
		wasInDoubt = s.Doubt
		s.Doubt, s.LeaseUntil, s.ClaimedBy = true, now.Add(e.cfg.Lease), e.cfg.Owner
		return tx.SaveChainStatusSend(ctx, s)
	})
	return s, wasInDoubt, ok, err
}

// statusHooks are tests' looks into a send: claimed is called after the
// claim, before GitLab is read or posted to; posted after GitLab accepted
// a post, before its outcome is recorded.
type statusHooks struct {
	claimed func(ChainStatus)
	posted  func(ChainStatus)
}

// sendStatus brings the status GitLab shows to what s wants, and records
// the outcome; posted says whether GitLab accepted a post. An error is the
// store's (or ctx's): what GitLab answered is recorded on the status.
func (e *Engine) sendStatus(ctx context.Context, s ChainStatus, wasInDoubt bool) (posted bool, err error) {
	if h := e.statusHooks.claimed; h != nil {
		h(s)
	}
	gl := e.statusGitLab()
	claim := s
	if wasInDoubt {
		have, desc, err := e.readStatus(ctx, s)
		if err != nil {
			return false, e.statusFailed(ctx, claim, s, err, true)
		}
		s.Have, s.HaveDesc = have, desc
	}
	state, post := commitStep(s.Have, s.HaveDesc, s.Want, s.WantDesc)
	if !post {
		// GitLab shows what is wanted, or what it shows cannot move there
		// (the description of a status still running waits for its end).
		s.DoneSeq, s.Doubt, s.Attempts, s.LastError = claim.WantSeq, false, 0, ""
		s.LeaseUntil, s.ClaimedBy = time.Time{}, ""
		e.obs.CommitStatus(string(s.Want), StatusUnchanged)
		return false, e.recordStatus(ctx, claim, s)
	}
	o := gitlab.StatusOptions{State: string(state), Name: s.name(), Ref: s.Ref, Description: s.WantDesc, PipelineID: s.PipelineID}
	if u := e.statusURL(s); u != nil {
		o.TargetURL = u(s.ChainID)
	}
	got, err := gl.SetCommitStatus(ctx, s.ProjectID, s.SHA, o)
	if err != nil {
		return false, e.statusFailed(ctx, claim, s, err, false)
	}
	if h := e.statusHooks.posted; h != nil {
		h(s)
	}
	s.Have, s.HaveDesc = CommitState(got.Status), s.WantDesc
	if s.Have == "" {
		s.Have = state
	}
	s.DoneSeq, s.Doubt, s.Attempts, s.LastError = claim.WantSeq, false, 0, ""
	s.SentAt = e.now()
	s.NextSendAt = s.SentAt.Add(e.statusInterval())
	s.LeaseUntil, s.ClaimedBy = time.Time{}, ""
	e.obs.CommitStatus(string(state), StatusPosted)
	if err := e.recordStatus(ctx, claim, s); err != nil {
		return false, err
	}
	e.log.Info("commit status set", "project", s.Project, "project_id", s.ProjectID, "pipeline_id", s.PipelineID,
		"chain_id", s.ChainID, "state", string(state))
	return true, nil
}

// readStatus returns what GitLab shows of depsd's status on s's pipeline:
// the newest of that name, ref and pipeline by the token's user ("" when
// there is none).
func (e *Engine) readStatus(ctx context.Context, s ChainStatus) (CommitState, string, error) {
	gl := e.statusGitLab()
	me, err := gl.CurrentUser(ctx)
	if err != nil {
		return "", "", err
	}
	list, err := gl.ListCommitStatuses(ctx, s.ProjectID, s.SHA, gitlab.StatusFilter{Ref: s.Ref, Name: s.name()})
	if err != nil {
		return "", "", err
	}
	var found *gitlab.CommitStatus
	for i := range list {
		st := &list[i]
		if st.PipelineID != s.PipelineID || st.Name != s.name() || (me.Username != "" && st.Author != me.Username) {
			continue
		}
		if found == nil || st.ID > found.ID {
			found = st
		}
	}
	if found == nil {
		return "", "", nil
	}
	return CommitState(found.Status), found.Description, nil
}

// statusFailed records GitLab's error on the status claimed as claim (cur:
// as the send knows it now, after any read): a refused
// transition is read back before the next post, and the want is given up
// after maxStatusRefusals; another permanent error gives the want up (a
// later change of the chain tries again); anything else (5xx, 429, 409,
// the network) is tried again after a backoff, in doubt. reading says the
// error came from reading, not posting: nothing was posted.
func (e *Engine) statusFailed(ctx context.Context, claim, cur ChainStatus, err error, reading bool) error {
	s := claim
	if ctx.Err() != nil {
		// Stopped mid-send: the claim is given back in doubt for the next
		// sender, at once rather than when its lease runs out.
		next := claim
		next.LeaseUntil, next.ClaimedBy = time.Time{}, ""
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := e.recordStatus(rctx, claim, next); rerr != nil {
			e.log.Warn("give back a commit status claim", "pipeline_id", s.PipelineID, "err", rerr)
		}
		return ctx.Err()
	}
	next := cur
	next.Attempts++
	next.LastError = err.Error()
	next.LeaseUntil, next.ClaimedBy = time.Time{}, ""
	outcome := StatusRetry
	switch {
	case errors.Is(err, gitlab.ErrStatusTransition):
		// GitLab shows something else than depsd knew: read it, go on
		// from there; give up after a few refusals.
		outcome = StatusRefused
		next.Doubt = true
		next.NextSendAt = e.now().Add(e.backoff(next.Attempts))
		if next.Attempts >= maxStatusRefusals {
			next.DoneSeq, next.Attempts = s.WantSeq, 0
			outcome = StatusGaveUp
		}
		e.log.Error("GitLab refused a commit status transition", "project", s.Project, "pipeline_id", s.PipelineID,
			"chain_id", s.ChainID, "state", string(s.Want), "err", err)
	case gitlab.IsRetryable(err) || reading:
		next.NextSendAt = e.now().Add(e.backoff(next.Attempts))
		e.log.Warn("commit status not set; will retry", "project", s.Project, "pipeline_id", s.PipelineID,
			"chain_id", s.ChainID, "err", err)
	default:
		// 403, 404 (the commit or the pipeline is gone), 422: this want
		// cannot be shown. Nothing moved on GitLab.
		outcome = StatusGaveUp
		next.DoneSeq, next.Doubt, next.Attempts = s.WantSeq, false, 0
		next.NextSendAt = e.now().Add(e.statusInterval())
		e.log.Error("commit status not set", "project", s.Project, "pipeline_id", s.PipelineID,
			"chain_id", s.ChainID, "state", string(s.Want), "err", err)
	}
	e.obs.CommitStatus(string(s.Want), outcome)
	return e.recordStatus(ctx, claim, next)
}

// recordStatus writes the sender's outcome next of the claim it made
// (claim), if the claim is still its own: a sender whose lease ran out
// and whose status another claimed records nothing (that one reads GitLab
// first: the status is in doubt).
func (e *Engine) recordStatus(ctx context.Context, claim, next ChainStatus) error {
	return e.cfg.Store.UpdateChains(ctx, func(tx Tx) error {
		cur, ok, err := tx.ChainStatus(ctx, claim.PipelineID)
		if err != nil || !ok {
			return err
		}
		if cur.ClaimedBy != claim.ClaimedBy || !cur.LeaseUntil.Equal(claim.LeaseUntil) {
			e.log.Warn("commit status claim taken over; outcome not recorded", "pipeline_id", claim.PipelineID)
			return nil
		}
		return tx.SaveChainStatusSend(ctx, next)
	})
}

// Outcomes of a commit status send (Observer.CommitStatus).
const (
	StatusPosted    = "posted"    // GitLab accepted the post
	StatusUnchanged = "unchanged" // GitLab showed it already, or cannot move there: nothing posted
	StatusRetry     = "retry"     // a retryable error: posted again later
	StatusRefused   = "refused"   // GitLab refused the transition: read back, tried again
	StatusGaveUp    = "gave_up"   // a permanent error, or refusals: this want is not shown
)

// RunStatuses sends the chains' commit statuses until ctx ends: when
// woken by a transaction that changed one (this process's), when the next
// falls due, and every PollInterval for those other processes changed.
// Errors are logged and retried at the next wake.
func (e *Engine) RunStatuses(ctx context.Context) error {
	if e.statusGitLab() == nil {
		return nil
	}
	for {
		if _, err := e.SendStatuses(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("commit status sending failed", "err", err)
		}
		wait := e.cfg.PollInterval
		var next time.Time
		var ok bool
		err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
			var err error
			next, ok, err = tx.NextChainStatusDue(ctx)
			return err
		})
		if err == nil && ok {
			wait = min(wait, max(next.Sub(e.now()), 100*time.Millisecond))
		}
		if !e.sleep(ctx, e.statusC, wait) {
			return nil
		}
	}
}

// statusGitLab is the client statuses are posted with: the chains'
// (Config.Statuses), else the validations' (Config.Premerge); nil when
// neither is on.
func (e *Engine) statusGitLab() StatusGitLab {
	if st := e.cfg.Statuses; st != nil {
		return st.GitLab
	}
	if pm := e.cfg.Premerge; pm != nil {
		return pm.GitLab
	}
	return nil
}

// statusInterval is the least time between two posts of one status.
func (e *Engine) statusInterval() time.Duration {
	if st := e.cfg.Statuses; st != nil {
		return st.Interval
	}
	if pm := e.cfg.Premerge; pm != nil {
		return pm.NoteInterval
	}
	return 5 * time.Second
}

// statusURL is the link of s's target page: a chain's, or a validation's.
func (e *Engine) statusURL(s ChainStatus) func(int64) string {
	if s.name() == ValidationStatusName {
		if pm := e.cfg.Premerge; pm != nil {
			return pm.URL
		}
		return nil
	}
	if st := e.cfg.Statuses; st != nil {
		return st.ChainURL
	}
	return nil
}

// name is s's status name (StatusName when unset).
func (s ChainStatus) name() string {
	if s.Name == "" {
		return StatusName
	}
	return s.Name
}

// NotifyStatuses wakes RunStatuses: a chain's status changed. It never
// blocks.
func (e *Engine) NotifyStatuses() { wake(e.statusC) }
