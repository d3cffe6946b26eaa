package chain

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// errPinsRefused is a pin move depsd will not make, or cannot: a
// protected branch, a token that may not push, a file without the pins.
// It is permanent: the member fails with it.
type errPinsRefused struct{ msg string }

func (e errPinsRefused) Error() string { return e.msg }

// sendPins opens or updates the merge request of a claimed pins action
// (movePins) and records what it did (recordPins). Like a pipeline's
// create, it is an action of the outbox: recorded before it is sent, and
// a resend finds what an earlier attempt made (the branch holding the
// same file, the open merge request of the branch) and adopts it.
func (e *Engine) sendPins(ctx context.Context, log *slog.Logger, a Action, chainID int64, callsDone func()) (bool, error) {
	callCtx, cancel := context.WithTimeout(gitlab.WithPriority(ctx, gitlab.PriorityUrgent), e.cfg.Lease/2)
	defer cancel()
	var (
		done      PinsDone
		writes    []Write
		permanent bool
		err       error
	)
	repo, ok := e.cfg.GitLab.(Repository)
	switch {
	case !ok:
		err, permanent = errPinsRefused{"this depsd's GitLab client cannot write to repositories"}, true
	case a.Pins == nil:
		err, permanent = errPinsRefused{"the action says nothing of the pins to move"}, true
	default:
		done, writes, permanent, err = e.movePins(callCtx, repo, a, chainID)
	}
	callsDone()
	recCtx, cancelRec := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Lease/2)
	defer cancelRec()
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		permanent = permanent || gitlab.IsPermanent(err) && !errors.Is(err, gitlab.ErrConflict)
		log.Warn("move pins failed", "err", err, "permanent", permanent)
		if len(writes) > 0 {
			if rerr := e.retryStore(recCtx, log, func() error { return e.recordWrites(recCtx, writes) }); rerr != nil {
				return false, rerr
			}
		}
		return false, e.retryStore(ctx, log, func() error { return e.recordError(ctx, a, err, permanent) })
	}
	if err := e.retryStore(recCtx, log, func() error { return e.recordPins(recCtx, a, done, writes) }); err != nil {
		return false, err
	}
	log.Info("pins moved", "merge_request", done.MergeRequest, "url", done.URL, "moved", len(done.Moved), "nothing", done.Nothing)
	return true, nil
}

// movePins writes the pin moves of a: the Containerfile read on the
// target branch, its pins of the action's upstreams moved (deps.MovePins:
// only their digests change), committed to depsd's own branch (forced
// from the target's head: one commit, whatever an earlier chain wrote
// there), and the merge request from that branch opened, or updated when
// one is open. It never writes the target branch, nor a protected one;
// a file changed on the target since it was read is refused by GitLab
// (last_commit_id) and read again, once. When nothing moves any more, an
// open merge request of the branch is closed with a note.
func (e *Engine) movePins(ctx context.Context, repo Repository, a Action, chainID int64) (done PinsDone, writes []Write, permanent bool, err error) {
	req := a.Pins
	target, source, pid := a.Ref, PinBranch(a.Ref, req.Default), a.ProjectID
	write := func(kind, ref, detail, url string) {
		writes = append(writes, Write{ChainID: chainID, At: e.now(), Project: a.Project, Kind: kind, Ref: ref, Detail: detail, URL: url})
	}
	refuse := func(format string, args ...any) (PinsDone, []Write, bool, error) {
		return done, writes, true, errPinsRefused{fmt.Sprintf(format, args...)}
	}
	project := deps.NodeProject(a.Project)
	if source == target {
		return refuse("%s is depsd's own branch for pins: depsd will not target it", target)
	}
	branch, err := repo.GetBranch(ctx, pid, source)
	exists := err == nil
	switch {
	case errors.Is(err, gitlab.ErrNotFound):
	case err != nil:
		return done, writes, false, err
	case branch.Protected:
		return refuse("branch %s of %s is protected: depsd writes its pin moves only to an unprotected branch of its own", source, project)
	}
	var commit string
	for attempt := 1; ; attempt++ {
		f, err := repo.ReadFile(ctx, pid, req.File, target)
		if errors.Is(err, gitlab.ErrNotFound) {
			return refuse("%s is not on %s of %s any more: no pin to move", req.File, target, project)
		}
		if err != nil {
			return done, writes, false, err
		}
		moves, err := pinMovesOf(req, f.Content, e.cfg.DepsOptions)
		if err != nil {
			return refuse("%s of %s: %v", req.File, project, err)
		}
		out, moved, err := deps.MovePins(req.File, f.Content, moves, e.cfg.DepsOptions)
		if err != nil {
			return refuse("%s of %s: %v", req.File, project, err)
		}
		if len(moved) == 0 {
			done.Nothing = true
			return e.closeStalePins(ctx, repo, a, source, target, write, done, writes)
		}
		done.Moved = moved
		if exists {
			// A resend after a crash, or a chain whose moves are the
			// same: the branch already holds the file.
			if cur, err := repo.ReadFile(ctx, pid, req.File, source); err == nil && bytes.Equal(cur.Content, out) {
				commit = branch.CommitSHA
				write("commit", source, fmt.Sprintf("%s already holds these moves at commit %s (written before: nothing committed)", source, shortSHA(commit)), "")
				break
			}
		}
		c, err := repo.CreateCommit(ctx, pid, gitlab.CommitRequest{
			Branch: source, StartBranch: target, Force: true, Message: pinsCommitMessage(a, moved),
			Actions: []gitlab.CommitAction{{Action: gitlab.ActionUpdate, Path: req.File, Content: string(out), LastCommitID: f.LastCommitSHA}},
		})
		switch {
		case err == nil:
			commit = c.SHA
			write("commit", source, fmt.Sprintf("commit %s on %s (from %s): %s", shortSHA(c.SHA), source, target, firstLine(c.Title, c.Message)), c.WebURL)
		case errors.Is(err, gitlab.ErrConflict) && attempt == 1:
			continue // the file changed on the target since it was read
		case errors.Is(err, gitlab.ErrConflict):
			return done, writes, false, fmt.Errorf("%s changed on %s of %s while its pins were moved, twice; trying again later: %w", req.File, target, project, err)
		case errors.Is(err, gitlab.ErrForbidden):
			return refuse("depsd's token may not push to %s of %s: give its user the Developer role in %s (depsd writes only its branch %s, never %s)", source, project, project, source, target)
		default:
			return done, writes, false, err
		}
		break
	}
	done.Commit = commit
	title, desc := e.pinsDescription(a, chainID, done.Moved)
	mr, found, err := openPinsMR(ctx, repo, pid, source, target)
	if err != nil {
		return done, writes, false, err
	}
	switch {
	case found && mr.Title == title && mr.Description == desc:
		write("merge-request", source, fmt.Sprintf("merge request !%d already open with these moves (opened before)", mr.IID), mr.WebURL)
	case found:
		if mr, err = repo.UpdateMergeRequest(ctx, pid, mr.IID, gitlab.MergeRequestUpdate{Title: &title, Description: &desc}); err != nil {
			return done, writes, false, err
		}
		write("merge-request", source, fmt.Sprintf("updated merge request !%d: %s", mr.IID, title), mr.WebURL)
	case !found:
		mr, err = repo.CreateMergeRequest(ctx, pid, gitlab.NewMergeRequest{SourceBranch: source, TargetBranch: target,
			Title: title, Description: desc, RemoveSourceBranch: true})
		if errors.Is(err, gitlab.ErrConflict) {
			// Opened meanwhile (an earlier attempt whose answer was lost).
			if mr, found, err = openPinsMR(ctx, repo, pid, source, target); err == nil && !found {
				err = fmt.Errorf("open merge request %s → %s of %s: GitLab says one is open, and none is listed", source, target, project)
			} else if err == nil {
				write("merge-request", source, fmt.Sprintf("merge request !%d already open (opened before)", mr.IID), mr.WebURL)
			}
		} else if err == nil {
			write("merge-request", source, fmt.Sprintf("opened merge request !%d: %s", mr.IID, title), mr.WebURL)
		}
		if errors.Is(err, gitlab.ErrForbidden) {
			return refuse("depsd's token may not open merge requests in %s: give its user the Developer role there", project)
		}
		if err != nil {
			return done, writes, false, err
		}
	}
	done.MergeRequest, done.URL = mr.IID, mr.WebURL
	if req.Mode == PinAutoMerge && mr.State == gitlab.MergeRequestOpened && !mr.AutoMerge {
		// Where the project allows it; without a pipeline running yet,
		// RunPins asks again.
		if _, err := repo.MergeMergeRequest(ctx, pid, mr.IID, gitlab.MergeOptions{AutoMerge: true, SHA: commit}); err == nil {
			write("merge-request", source, fmt.Sprintf("set merge request !%d to merge when its pipeline succeeds", mr.IID), mr.WebURL)
		} else {
			e.log.Info("auto-merge not set yet; asking again later", "project", a.Project, "merge_request", mr.IID, "err", err)
		}
	}
	return done, writes, false, nil
}

// closeStalePins closes the open merge request of source with a note:
// the target branch already pins what it would move.
func (e *Engine) closeStalePins(ctx context.Context, repo Repository, a Action, source, target string, write func(kind, ref, detail, url string), done PinsDone, writes []Write) (PinsDone, []Write, bool, error) {
	mr, found, err := openPinsMR(ctx, repo, a.ProjectID, source, target)
	if err != nil || !found {
		return done, writes, false, err
	}
	note := fmt.Sprintf("depsd: %s already pins the new images of %s; this merge request no longer moves anything, so depsd closes it.",
		target, strings.Join(a.Upstreams, ", "))
	if _, err := repo.CreateMergeRequestNote(ctx, a.ProjectID, mr.IID, note); err != nil {
		return done, writes, false, err
	}
	write("note", source, fmt.Sprintf("note on merge request !%d: %s", mr.IID, note), mr.WebURL)
	if _, err := repo.CloseMergeRequest(ctx, a.ProjectID, mr.IID); err != nil {
		return done, writes, false, err
	}
	write("close", source, fmt.Sprintf("closed merge request !%d: nothing left to move", mr.IID), mr.WebURL)
	return done, writes, false, nil
}

// openPinsMR finds the open merge request from source into target.
func openPinsMR(ctx context.Context, repo Repository, projectID int64, source, target string) (gitlab.MergeRequest, bool, error) {
	mrs, err := repo.ListMergeRequests(ctx, projectID, gitlab.MergeRequestFilter{SourceBranch: source, State: gitlab.MergeRequestOpened})
	if err != nil {
		return gitlab.MergeRequest{}, false, err
	}
	for _, mr := range mrs {
		if mr.TargetBranch == target && mr.SourceBranch == source {
			return mr, true, nil
		}
	}
	return gitlab.MergeRequest{}, false, nil
}

// pinMovesOf are the moves of the pins in content that name an image of
// one of req's upstreams: each pin, on its digest, to the digest its
// upstream's verified build published under its tag (for a digest alone,
// the one tag the upstream published in that repository, else latest).
func pinMovesOf(req *PinsRequest, content []byte, opts deps.Options) ([]deps.PinMove, error) {
	a, err := deps.AnalyzeContainerfile(req.File, content, opts)
	if err != nil {
		return nil, err
	}
	var moves []deps.PinMove
	for _, d := range a.Dependencies {
		if !d.Pinned {
			continue
		}
		for _, u := range req.Upstreams {
			if to, ok := pinTarget(d, u.Images); ok {
				moves = append(moves, deps.PinMove{Repository: d.Repository, From: d.Digest, To: to})
			}
		}
	}
	return moves, nil
}

// pinTarget is the digest of images the pinned dependency d moves to.
func pinTarget(d deps.Dependency, images map[string]string) (string, bool) {
	if d.Tag != "" {
		to, ok := images[d.Repository+":"+d.Tag]
		return to, ok
	}
	var tags []string
	for img := range images {
		if repo, _, ok := cutTag(img); ok && repo == d.Repository {
			tags = append(tags, img)
		}
	}
	if len(tags) == 1 {
		return images[tags[0]], true
	}
	to, ok := images[d.Repository+":latest"]
	return to, ok
}

// cutTag splits host/path:tag.
func cutTag(image string) (repo, tag string, ok bool) {
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "", false
	}
	return image[:i], image[i+1:], true
}

// pinsCommitMessage names what the commit moves.
func pinsCommitMessage(a Action, moved []deps.PinMoved) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Move the digest pins of %s to their new images\n\n", strings.Join(a.Upstreams, ", "))
	for _, m := range moved {
		fmt.Fprintf(&b, "%s:%d: %s %s → %s\n", a.Pins.File, m.Line, pinImage(m), m.From, m.To)
	}
	fmt.Fprintf(&b, "\nWritten by depsd for chain %d; only the digests change.\n", a.ChainID)
	return b.String()
}

// pinImage names a pin's image with its tag.
func pinImage(m deps.PinMoved) string {
	if m.Tag != "" {
		return m.Repository + ":" + m.Tag
	}
	return m.Repository
}

// pinsDescription is the merge request's title and description: each
// upstream, image, old and new digest, the chain and its link.
func (e *Engine) pinsDescription(a Action, chainID int64, moved []deps.PinMoved) (title, desc string) {
	ups := slices.Clone(a.Upstreams)
	title = "depsd: move the digest pins of " + strings.Join(ups, ", ") + " to their new images"
	chain := fmt.Sprintf("chain %d", chainID)
	if e.cfg.ChainURL != nil {
		if u := e.cfg.ChainURL(chainID); u != "" {
			chain = fmt.Sprintf("[chain %d](%s)", chainID, u)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "depsd rebuilt %s in %s; this project pins %s by digest in `%s`. This merge request moves each pin to the new image, and changes nothing else.\n\n",
		strings.Join(ups, ", "), chain, cmp.Or(strings.Join(ups, ", "), "its upstreams"), a.Pins.File)
	b.WriteString("| upstream | image | line | from | to |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range moved {
		up := ""
		for _, u := range a.Pins.Upstreams {
			if to, ok := pinTarget(deps.Dependency{Repository: m.Repository, Tag: m.Tag}, u.Images); ok && to == m.To {
				up = u.Node
				break
			}
		}
		fmt.Fprintf(&b, "| %s | `%s` | %d | `%s` | `%s` |\n", up, pinImage(m), m.Line, m.From, m.To)
	}
	fmt.Fprintf(&b, "\nOnce merged, the merge's pipeline on `%s` is this project's build in %s, and the chain goes on below it. Closed without merging, or left open for %s, the project is skipped in this chain: what is built only on it is not rebuilt for this change.\n",
		a.Ref, chain, e.cfg.PinTimeout)
	return title, b.String()
}

// recordPins records what a pins action did: the action sent, the
// writes, and the member waiting for its merge request (or, when the
// target branch already pins the new digests, queued for a build).
func (e *Engine) recordPins(ctx context.Context, a Action, done PinsDone, writes []Write) error {
	err := e.update(ctx, nil, func(t *txn) error {
		cur, ok, err := t.tx.Action(t.ctx, a.ID)
		if err != nil || !ok || cur.State != ActionPending {
			return err // recorded already, or gone
		}
		if cur.Pins == nil {
			cur.Pins = a.Pins
		}
		cur.State, cur.SentAt, cur.LeaseUntil, cur.LastError = ActionSent, t.now, time.Time{}, ""
		cur.Pins.Done, cur.PipelineURL = &done, done.URL
		if err := t.tx.UpdateAction(t.ctx, cur); err != nil {
			return err
		}
		c, m := t.memberByAction(a.ID)
		for _, w := range writes {
			if c != nil {
				w.ChainID = c.ID
			}
			if err := t.tx.AddWrite(t.ctx, w); err != nil {
				return err
			}
		}
		if m == nil || m.State != WaitingMerge {
			return nil // the member moved on (a merge reset it, the chain expired)
		}
		c.touch(t.now)
		if done.Nothing {
			m.State, m.Why, m.ActionID = Pending, fmt.Sprintf("%s already pins the new images of %s: building it", a.Ref, strings.Join(a.Upstreams, ", ")), ""
			if _, err := t.enqueuePipeline(c, m); err != nil {
				return err
			}
			return t.settle(c)
		}
		m.MergeRequest, m.MergeRequestIID, m.TriggeredAt = done.URL, done.MergeRequest, t.now
		m.Why = fmt.Sprintf("waiting for merge request !%d to be merged (%s)", done.MergeRequest, movedSummary(done.Moved))
		return nil
	})
	if err != nil {
		return fmt.Errorf("record pins of %s: %w", a.Project, err)
	}
	return nil
}

// recordWrites records writes of a send that failed after making them.
func (e *Engine) recordWrites(ctx context.Context, writes []Write) error {
	return e.update(ctx, nil, func(t *txn) error {
		for _, w := range writes {
			if err := t.tx.AddWrite(t.ctx, w); err != nil {
				return err
			}
		}
		return nil
	})
}

// movedSummary says what moves, shortly.
func movedSummary(moved []deps.PinMoved) string {
	var parts []string
	for _, m := range moved {
		parts = append(parts, fmt.Sprintf("%s %s → %s", pinImage(m), shortDigest(m.From), shortDigest(m.To)))
	}
	return "moves " + strings.Join(parts, ", ")
}

func shortDigest(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return d
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func firstLine(title, message string) string {
	if title != "" {
		return title
	}
	l, _, _ := strings.Cut(message, "\n")
	return l
}
