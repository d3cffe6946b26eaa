package chain

import (
	"fmt"
	"time"
)

// statusClass groups GitLab's pipeline statuses by what they mean to a chain.
type statusClass int

const (
	classUnknown  statusClass = iota
	classQueued               // created, waiting_for_resource, preparing, pending, scheduled
	classRunning              // running
	classManual               // manual: waits for someone to play a job; not an end
	classSuccess              // success
	classFailed               // failed
	classCanceled             // canceled
	classSkipped              // skipped: nothing ran; counted as a failure
)

func classify(status string) statusClass {
	switch status {
	case "created", "waiting_for_resource", "preparing", "pending", "scheduled":
		return classQueued
	case "running":
		return classRunning
	case "manual":
		return classManual
	case "success":
		return classSuccess
	case "failed":
		return classFailed
	case "canceled", "canceling":
		return classCanceled
	case "skipped":
		return classSkipped
	}
	return classUnknown
}

// applyStatus moves member m, whose current pipeline reported status, and
// reports whether it changed and whether the member just succeeded. The
// rules, in GitLab's terms:
//   - a status never moves a member backwards: a late "running" after
//     "success" is ignored;
//   - a failed or canceled member stays so until its project succeeds: a
//     retry of the same pipeline reaching success, or any newer pipeline.
//     Queued and running statuses do not revive it, because GitLab does
//     not order webhooks and the create-pipeline answer can arrive after
//     the pipeline's own "failed": a late "created" or "running" must not
//     unblock the descendants;
//   - "manual" keeps the member running (the chain waits for the job);
//   - "skipped" counts as a failure: nothing was built, so the descendants
//     would be built on the old image; they are blocked and the operator
//     sees why;
//   - when the pipeline of a requeued member ends, however it ends, the
//     queued build takes over: the member goes back to waiting and is
//     triggered again once its in-chain upstreams have succeeded.
func (m *Member) applyStatus(pipelineID int64, status, url string, now time.Time) (changed, succeeded bool) {
	cls := classify(status)
	live := m.State.Building() || m.State == Failed || m.State == Canceled
	if !live || cls == classUnknown {
		return false, false
	}
	before := *m
	if url != "" {
		m.PipelineURL = url
	}
	switch cls {
	case classQueued:
		if m.State == Pending {
			m.State, m.Why = Triggered, fmt.Sprintf("pipeline %d %s", pipelineID, status)
			m.FinishedAt = time.Time{}
		}
	case classRunning, classManual:
		if m.State == Failed || m.State == Canceled {
			break
		}
		if m.State != MemberRunning || cls == classManual || m.Why != "" {
			m.State, m.Why = MemberRunning, ""
			if cls == classManual {
				m.Why = fmt.Sprintf("pipeline %d waits for a manual job", pipelineID)
			}
			m.FinishedAt = time.Time{}
		}
	case classSuccess:
		if m.State == Success {
			break
		}
		if m.Requeued && m.State.Building() {
			m.requeue()
			break
		}
		m.State, m.Why, m.FinishedAt = Success, "", now
		succeeded = true
	case classFailed, classCanceled, classSkipped:
		if !m.State.Building() {
			break // already ended; a retry would come as queued/running first
		}
		if m.Requeued {
			m.requeue()
			break
		}
		m.State, m.FinishedAt = Failed, now
		switch cls {
		case classCanceled:
			m.State, m.Why = Canceled, fmt.Sprintf("pipeline %d was canceled", pipelineID)
		case classSkipped:
			m.Why = fmt.Sprintf("pipeline %d was skipped (no job ran)", pipelineID)
		default:
			m.Why = fmt.Sprintf("pipeline %d failed", pipelineID)
		}
	}
	return !sameMember(before, *m), succeeded
}

// requeue starts the queued build: the member waits again for its
// upstreams, and its next action is a new one.
func (m *Member) requeue() {
	m.Requeued = false
	m.State, m.Why = Waiting, ""
	m.ActionID, m.NoCache = "", false
	m.Verified, m.VerifyDetail, m.Images = "", "", nil
	m.MergeRequest, m.MergeRequestIID, m.MergeSHA = "", 0, ""
	m.FinishedAt = time.Time{}
}

// reset makes a finished member wait for a new build, because an upstream
// changed after it was built.
func (m *Member) reset() {
	m.requeue()
	m.PipelineID, m.PipelineURL = 0, ""
	m.TriggeredAt = time.Time{}
}

func sameMember(a, b Member) bool {
	return a.State == b.State && a.Why == b.Why && a.Requeued == b.Requeued && a.NoCache == b.NoCache &&
		a.Verified == b.Verified && a.VerifyDetail == b.VerifyDetail &&
		a.ActionID == b.ActionID && a.PipelineID == b.PipelineID && a.PipelineURL == b.PipelineURL &&
		a.FinishedAt.Equal(b.FinishedAt) && a.TriggeredAt.Equal(b.TriggeredAt)
}
