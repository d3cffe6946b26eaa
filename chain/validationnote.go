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

// The answer on a merge request (premerge.go): a commit status named
// ValidationStatusName on the merge request pipeline whose candidate was
// built on (sent by the commit status sender, statussend.go), and one
// note, created once and edited as the validation goes on. Both are
// derived from the validation in the transactions that change it, and
// name a dependent only where everyone who can see the upstream's merge
// request may see it (mayName); the others are counted.

// noteMarker opens every note depsd writes on a merge request: how a
// sender whose create's outcome was lost finds the note it made.
func noteMarker(iid int64) string { return fmt.Sprintf("<!-- depsd: validation of !%d -->", iid) }

// saveMR saves v with what its note should say now (its validation as this
// transaction holds it): a changed want is due to the sender.
func (t *txn) saveMR(v MRValidation) error {
	v.UpdatedAt = t.now
	var c *Chain
	if v.ChainID != 0 {
		var err error
		if c, err = t.chainByID(v.ChainID); err != nil {
			return err
		}
	}
	body, err := t.noteBody(v, c)
	if err != nil {
		return err
	}
	if body != "" && body != v.Note.Want {
		v.Note.Want = body
		v.Note.WantSeq++
		t.after = append(t.after, t.e.NotifyValidations)
	}
	return t.tx.SaveMRValidation(t.ctx, v)
}

// wantValidation writes what validation c's commit status and note
// should show, once c changed in this transaction.
func (t *txn) wantValidation(c *Chain) error {
	if t.e.premerge() == nil || c.Validation == nil || c.State == Merged {
		return nil
	}
	root, _, err := t.project(deps.NodeProject(c.Roots[0]))
	if err != nil {
		return err
	}
	n := countValidation(c)
	state := validationCommitState(c, n)
	desc := validationDescription(c, n, func(m *Member) (string, bool) { return t.statusLabel(m.Project, root) })
	b := c.bk()
	if b.statuses == nil {
		b.statuses = map[int64]statusWant{}
	}
	w := statusWant{chainID: c.ID, state: state, desc: desc}
	if state != "" && b.statuses[c.Validation.PipelineID] != w {
		if err := t.tx.WantChainStatus(t.ctx, c.Validation.PipelineID, c.ID, state, desc); err != nil {
			return fmt.Errorf("validation %d: status of pipeline %d: %w", c.ID, c.Validation.PipelineID, err)
		}
		b.statuses[c.Validation.PipelineID] = w
		t.statusesWanted = true
	}
	v, ok, err := t.tx.MRValidation(t.ctx, c.Validation.ProjectID, c.Validation.IID)
	if err != nil || !ok || v.ChainID != c.ID {
		return err // the note follows the merge request's newest validation
	}
	return t.saveMR(v)
}

// validationCounts is what a validation's status and note say of its
// members (the root, the upstream, is not counted).
type validationCounts struct {
	total, built, skipped, building, blocked, canceled int
	failed                                             []*Member
	started                                            bool
}

func countValidation(c *Chain) validationCounts {
	var n validationCounts
	for _, m := range c.Members {
		if m.Project == c.Roots[0] {
			continue
		}
		n.total++
		switch {
		case m.State == Success:
			n.built++
		case m.State == MemberSkipped:
			n.skipped++
		case m.State == Failed || m.State == Stale:
			n.failed = append(n.failed, m)
		case m.State == Canceled || m.State == MemberExpired:
			n.canceled++
		case m.State == MemberBlocked:
			n.blocked++
		case m.State.Building() || m.State == Verifying:
			n.building++
		}
		if m.State != Waiting && m.State != Pending && m.State != MemberSkipped {
			n.started = true
		}
	}
	return n
}

// validationCommitState is the state of a validation's commit status:
// pending until a build left the outbox, running, then success when every
// dependent built (or could not validate) and failed when one failed or
// was blocked by a failure; canceled when it was called off or expired
// without a failure.
func validationCommitState(c *Chain, n validationCounts) CommitState {
	switch {
	case c.Validation.Canceled != "" || c.State == ChainCanceled:
		return CommitCanceled
	case c.State == Running && n.started:
		return CommitRunning
	case c.State == Running:
		return CommitPending
	case c.State == Expired && len(n.failed) == 0:
		return CommitCanceled
	case len(n.failed) > 0 || n.blocked > 0 || (c.State != Expired && n.canceled > 0):
		return CommitFailed
	case c.State == Finished:
		return CommitSuccess
	}
	return CommitFailed
}

// validationDescription says a validation's progress in one line of at
// most maxStatusDescription bytes: "2 of 3 dependents built, 1 failed:
// lang/ruby".
func validationDescription(c *Chain, n validationCounts, label func(*Member) (string, bool)) string {
	var b strings.Builder
	if c.Validation.Canceled != "" {
		b.WriteString("canceled (" + c.Validation.Canceled + "): ")
	}
	noun := "dependents"
	if n.total == 1 {
		noun = "dependent"
	}
	fmt.Fprintf(&b, "%d of %d %s built", n.built, n.total, noun)
	out := b.String()
	var tail []string
	if n.building > 0 && c.State == Running && c.Validation.Canceled == "" {
		tail = append(tail, fmt.Sprintf("%d building", n.building))
	}
	if n.blocked > 0 {
		tail = append(tail, fmt.Sprintf("%d blocked", n.blocked))
	}
	if n.skipped > 0 {
		tail = append(tail, fmt.Sprintf("%d cannot validate", n.skipped))
	}
	rest := ""
	if len(tail) > 0 {
		rest = ", " + strings.Join(tail, ", ")
	}
	return withFailed(out, n.failed, label, rest)
}

// memberResult says in a word how a validation member ended, or where it
// is.
func memberResult(m *Member) string {
	switch m.State {
	case Success:
		return "built"
	case MemberSkipped:
		return "cannot validate"
	case Verifying:
		return "built; reading its image"
	case Failed, Stale:
		return "**failed**"
	case MemberBlocked:
		return "blocked"
	case Pending, Triggered:
		return "queued"
	case MemberRunning:
		return "building"
	}
	return string(m.State)
}

// noteBody is the note on v's merge request: the validation c (nil: none
// yet) of its candidate, a table of the dependents with their pipeline
// and result, and the digests built on and built. "" says nothing yet.
func (t *txn) noteBody(v MRValidation, c *Chain) (string, error) {
	if c == nil || c.Validation == nil {
		if v.Note.ID == 0 {
			return "", nil
		}
	}
	var b strings.Builder
	b.WriteString(noteMarker(v.IID) + "\n")
	b.WriteString("#### depsd: the images that build on this one\n\n")
	if c == nil || c.Validation == nil || c.Validation.PipelineID != v.PipelineID {
		switch {
		case v.StartDue:
			fmt.Fprintf(&b, "Pipeline %s of commit `%s` pushed a new candidate: its dependents are built on it next.\n", pipelineLink(v.PipelineID, v.PipelineURL), shortSHA(v.HeadSHA))
		case v.PipelineStatus != "" && classify(v.PipelineStatus) != classSuccess && classify(v.PipelineStatus) != classQueued && classify(v.PipelineStatus) != classRunning:
			fmt.Fprintf(&b, "Pipeline %s of commit `%s` %s: there is no candidate image to build the dependents on.\n", pipelineLink(v.PipelineID, v.PipelineURL), shortSHA(v.HeadSHA), v.PipelineStatus)
		default:
			fmt.Fprintf(&b, "Waiting for the candidate of commit `%s` (pipeline %s).\n", shortSHA(v.HeadSHA), pipelineLink(v.PipelineID, v.PipelineURL))
		}
		if v.LastError != "" {
			fmt.Fprintf(&b, "\n%s\n", v.LastError)
		}
		if c != nil {
			fmt.Fprintf(&b, "\nThe validation of an earlier commit, %s, was %s.\n", validationLink(t.e, c.ID), strings.TrimPrefix(string(c.State), ""))
		}
		return b.String(), nil
	}
	root, _, err := t.project(deps.NodeProject(c.Roots[0]))
	if err != nil {
		return "", err
	}
	val := c.Validation
	n := countValidation(c)
	verdict := map[CommitState]string{
		CommitPending: "queued", CommitRunning: "running", CommitSuccess: "**every dependent builds**",
		CommitFailed: "**failed**", CommitCanceled: "canceled",
	}[validationCommitState(c, n)]
	fmt.Fprintf(&b, "Validation %s of commit `%s`: %s. %s.\n\n", validationLink(t.e, c.ID), shortSHA(val.SHA), verdict,
		validationDescription(c, n, func(m *Member) (string, bool) { return t.statusLabel(m.Project, root) }))
	fmt.Fprintf(&b, "Built on the candidate `%s@%s` (pipeline %s)", val.Candidate, val.Digest, pipelineLink(val.PipelineID, val.PipelineURL))
	if val.Depth == DepthAll {
		b.WriteString(", every level below on the one above's validation image")
	}
	b.WriteString("; nothing is published.\n")
	if val.Canceled != "" {
		fmt.Fprintf(&b, "\nCalled off: %s.\n", val.Canceled)
	}
	b.WriteString("\n| dependent | result | pipeline | image built |\n| --- | --- | --- | --- |\n")
	hidden := map[string]int{}
	for _, m := range c.inOrder() {
		if m.Project == c.Roots[0] {
			continue
		}
		l, ok := t.statusLabel(m.Project, root)
		if !ok {
			hidden[memberResult(m)]++
			continue
		}
		image := ""
		if _, d := onlyImage(m.Images); d != "" {
			image = "`" + d + "`"
		}
		result := memberResult(m)
		if m.State == MemberSkipped || m.State == MemberBlocked || m.State == Failed {
			if why := strings.TrimSpace(m.Why); why != "" && m.State != Failed {
				result += ": " + escapeCell(why)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", escapeCell(l), result, pipelineLink(m.PipelineID, m.PipelineURL), image)
	}
	for _, r := range sortedKeysInt(hidden) {
		noun := "projects"
		if hidden[r] == 1 {
			noun = "project"
		}
		fmt.Fprintf(&b, "| %d %s you may not see | %s | | |\n", hidden[r], noun, r)
	}
	return b.String(), nil
}

// inOrder are c's members in build order.
func (c *Chain) inOrder() []*Member {
	order, _, _ := c.topoOrder()
	return order
}

func sortedKeysInt(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func escapeCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func pipelineLink(id int64, url string) string {
	switch {
	case id == 0:
		return ""
	case url == "":
		return "#" + formatID(id)
	}
	return fmt.Sprintf("[#%d](%s)", id, url)
}

func validationLink(e *Engine, chainID int64) string {
	if o := e.premerge(); o != nil && o.URL != nil {
		if u := o.URL(chainID); u != "" {
			return fmt.Sprintf("[%d](%s)", chainID, u)
		}
	}
	return formatID(chainID)
}

// noteDue reports whether n is to be sent now: due (NoteSend.Due), or
// claimed by an owner no longer alive, whose claim is void before its
// lease ends (as an action's: the store's liveness leases).
func (t *txn) noteDue(n NoteSend) (bool, error) {
	if n.Due(t.now) {
		return true, nil
	}
	if n.DoneSeq >= n.WantSeq || n.NextSendAt.After(t.now) || n.ClaimedBy == "" || n.ClaimedBy == t.e.cfg.Owner {
		return false, nil
	}
	alive, err := t.tx.OwnerAlive(t.ctx, n.ClaimedBy, t.now)
	return !alive, err
}

// sendNote brings the note on v's merge request to what it should say:
// claimed (in doubt from then on), created once (a note in doubt is
// looked for among the merge request's notes by the token's user first),
// then edited; the outcome is recorded if the claim is still this
// sender's.
func (e *Engine) sendNote(ctx context.Context, v MRValidation) error {
	opts := e.premerge()
	var claim MRValidation
	var wasInDoubt, claimed bool
	err := e.update(ctx, nil, func(t *txn) error {
		cur, ok, err := t.tx.MRValidation(t.ctx, v.ProjectID, v.IID)
		if err != nil || !ok {
			return err
		}
		if due, err := t.noteDue(cur.Note); err != nil || !due {
			return err
		}
		wasInDoubt = cur.Note.Doubt
		cur.Note.Doubt, cur.Note.LeaseUntil, cur.Note.ClaimedBy = true, t.now.Add(e.cfg.Lease), e.cfg.Owner
		claim, claimed = cur, true
		return t.tx.SaveMRValidation(t.ctx, cur)
	})
	if err != nil || !claimed {
		return err
	}
	note := claim.Note
	gl := opts.GitLab
	id := note.ID
	var sendErr error
	if id == 0 && wasInDoubt {
		// An earlier create's outcome is unknown: the note may exist.
		me, err := gl.CurrentUser(ctx)
		if err == nil {
			var notes []gitlab.Note
			if notes, err = gl.ListMergeRequestNotes(ctx, claim.ProjectID, claim.IID); err == nil {
				for _, n := range notes {
					if !n.System && (me.Username == "" || n.Author == me.Username) && strings.HasPrefix(n.Body, noteMarker(claim.IID)) {
						id = n.ID
					}
				}
			}
		}
		sendErr = err
	}
	if sendErr == nil {
		if id == 0 {
			var n gitlab.Note
			n, sendErr = gl.CreateMergeRequestNote(ctx, claim.ProjectID, claim.IID, note.Want)
			id = n.ID
		} else {
			_, sendErr = gl.UpdateMergeRequestNote(ctx, claim.ProjectID, claim.IID, id, note.Want)
			if errors.Is(sendErr, gitlab.ErrNotFound) {
				// Deleted by someone: a new one.
				var n gitlab.Note
				n, sendErr = gl.CreateMergeRequestNote(ctx, claim.ProjectID, claim.IID, note.Want)
				id = n.ID
			}
		}
	}
	if sendErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return e.update(context.WithoutCancel(ctx), nil, func(t *txn) error {
		cur, ok, err := t.tx.MRValidation(t.ctx, claim.ProjectID, claim.IID)
		if err != nil || !ok {
			return err
		}
		if cur.Note.ClaimedBy != note.ClaimedBy || !cur.Note.LeaseUntil.Equal(note.LeaseUntil) {
			e.log.Warn("merge request note claim taken over; outcome not recorded", "project", claim.Project, "merge_request", claim.IID)
			return nil
		}
		n := &cur.Note
		n.LeaseUntil, n.ClaimedBy = time.Time{}, ""
		switch {
		case sendErr == nil:
			n.ID, n.DoneSeq, n.Doubt, n.Attempts, n.LastError = id, note.WantSeq, false, 0, ""
			n.SentAt = t.now
			n.NextSendAt = t.now.Add(opts.NoteInterval)
			t.after = append(t.after, func() {
				e.log.Info("merge request note written", "project", claim.Project, "merge_request", claim.IID, "note_id", id)
			})
		case gitlab.IsRetryable(sendErr):
			// In doubt still: a create may have gone through.
			n.Attempts++
			n.LastError = sendErr.Error()
			n.NextSendAt = t.now.Add(e.backoff(n.Attempts))
			if id != 0 {
				n.ID = id
			}
		default:
			// 403, 404 (the merge request is gone), 422: this want
			// cannot be written; a later change tries again.
			n.DoneSeq, n.Attempts, n.LastError, n.Doubt = note.WantSeq, 0, sendErr.Error(), false
			if id != 0 {
				n.ID = id
			}
			n.NextSendAt = t.now.Add(opts.NoteInterval)
			t.after = append(t.after, func() {
				e.log.Error("merge request note not written", "project", claim.Project, "merge_request", claim.IID, "err", sendErr)
			})
		}
		return t.tx.SaveMRValidation(t.ctx, cur)
	})
}
