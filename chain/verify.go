package chain

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// VerifyMode is what the engine does with the verdict on the images a
// member's build published (images.verify in depsd.yaml).
type VerifyMode string

const (
	// VerifyOff: nothing is read; members succeed with their pipeline.
	VerifyOff VerifyMode = "off"
	// VerifyReport: the images are verified and the verdict recorded and
	// shown; members succeed with their pipeline.
	VerifyReport VerifyMode = "report"
	// VerifyEnforce (the default with a Verifier): a member whose pipeline
	// succeeded is Verifying until the verdict; a stale one is rebuilt
	// once without cache, and ends Stale if it is still stale.
	VerifyEnforce VerifyMode = "enforce"
)

// ImageState is the verdict on the images of one build.
type ImageState string

const (
	// ImageFresh: every image was built on its upstreams' current images.
	ImageFresh ImageState = "fresh"
	// ImageStale: some image was built on an earlier image of an upstream.
	ImageStale ImageState = "stale"
	// ImageUnknown: the images could not be judged (not found, squashed,
	// a registry that did not answer in time, ...). It never blocks.
	ImageUnknown ImageState = "unknown"
	// ImagePinned: some image was built on an earlier image of an
	// upstream because its Containerfile pins that image by digest. Like
	// unknown it blocks nothing and is not rebuilt without cache: the
	// pin has to move, which a rebuild cannot do.
	ImagePinned ImageState = "pinned"
)

// Verifier judges the images a project published against its upstreams'
// current images; the daemon implements it with the verify package, and
// records each image's result for the freshness views.
type Verifier interface {
	// Publishes reports whether project publishes images to verify. It is
	// called inside store transactions: no I/O, quick.
	Publishes(project string) bool
	// Verify reads the images project published with the pipeline of req
	// and judges them. It is called outside any store transaction,
	// possibly concurrently, with a context bounded by
	// Config.VerifyTimeout, and it never fails: what cannot be read is
	// ImageUnknown with the reason in Detail. The engine records nothing
	// of a verification whose context ended with the engine's (shutdown).
	Verify(ctx context.Context, req VerifyRequest) Verification
}

// VerifyRequest asks for the verification of one successful build.
type VerifyRequest struct {
	Project    string
	ProjectID  int64
	PipelineID int64
	ChainID    int64 // the chain whose member succeeded; 0 outside a chain
}

// Verification is the verdict on the images of one build.
type Verification struct {
	State ImageState
	// Detail says it in a sentence; for a stale verdict, what the image
	// was built on and what it should have been ("built on ruby
	// sha256:…, not sha256:… (base annotation)").
	Detail string
	// Images are the digests read of the build's images, by image
	// (host/path:tag): what a downstream's pins of them move to.
	Images map[string]string
}

// VerifyTask is a successful build whose images are to be verified. The
// store is the queue: a task is written in the transaction that recorded
// the success, and removed in the one that applies its verdict, so a
// crash in between loses nothing (the verification is simply done again).
type VerifyTask struct {
	Project    string
	ProjectID  int64
	PipelineID int64
	ChainID    int64 // the chain the success counted in when queued; 0 outside a chain
	QueuedAt   time.Time
}

// verifyBatch is how many queued verifications VerifyPending reads at a
// time.
const verifyBatch = 64

// verifies reports whether the successes of project are verified.
func (e *Engine) verifies(project string) bool {
	return e.cfg.Verifier != nil && e.cfg.Verify != VerifyOff && e.cfg.Verifier.Publishes(project)
}

// NotifyVerify wakes RunVerify: a verification was queued. It never
// blocks.
func (e *Engine) NotifyVerify() { wake(e.verifyC) }

// queueVerify writes a verification task and wakes the verifier once the
// transaction committed.
func (t *txn) queueVerify(task VerifyTask) error {
	task.QueuedAt = t.now
	if err := t.tx.QueueVerify(t.ctx, task); err != nil {
		return fmt.Errorf("queue verification of %s pipeline %d: %w", task.Project, task.PipelineID, err)
	}
	t.after = append(t.after, t.e.NotifyVerify)
	return nil
}

// verifyAfter queues the verification of what member m's pipeline
// published, once m succeeded with it, and under VerifyEnforce holds m in
// Verifying (its descendants wait) until the verdict. The caller holds m
// changed.
func (t *txn) verifyAfter(c *Chain, m *Member) error {
	if c.IsValidation() {
		// Published nothing: its image is read only for the level below.
		return t.validatedAfter(c, m)
	}
	if m.State != Success || !t.e.verifies(m.Project) {
		return nil
	}
	if err := t.queueVerify(VerifyTask{Project: m.Project, ProjectID: m.ProjectID, PipelineID: m.PipelineID, ChainID: c.ID}); err != nil {
		return err
	}
	if t.e.cfg.Verify == VerifyEnforce && c.Mode == Full {
		m.State, m.Why = Verifying, fmt.Sprintf("pipeline %d succeeded; verifying its images", m.PipelineID)
		c.touch(t.now)
	}
	return nil
}

// verifyOutside queues the report-only verification of a success that is
// no member's build (a root's own pipeline, a project without dependents,
// first-level mode).
func (t *txn) verifyOutside(ev PipelineEvent, projectID int64) error {
	if classify(ev.Status) != classSuccess || !t.e.verifies(ev.Project) {
		return nil
	}
	return t.queueVerify(VerifyTask{Project: ev.Project, ProjectID: projectID, PipelineID: ev.PipelineID})
}

// VerifyPending verifies the queued successes until none is left, up to
// Config.VerifyConcurrency at once, and applies each verdict in a
// transaction of its own as soon as it is reached, and returns how many it
// applied. A verification queued meanwhile starts as soon as a slot is
// free (NotifyVerify wakes it; one queued by another replica is found
// within PollInterval): one waiting for a slow registry holds back only
// its own member, never those queued after it (they once waited for the
// whole batch read with it, up to images.timeout, behind a report-only
// verification of a chain's root). Under VerifyEnforce, a member still
// Verifying the same pipeline then:
//   - succeeds when its images are fresh or unknown (its descendants go
//     on: unknown never blocks);
//   - is rebuilt once without cache when they are stale (a new action
//     with NoCache; the member is Pending again);
//   - ends Stale when the build without cache is stale too: its
//     descendants are blocked, with the digests in the reason.
//
// Otherwise the verdict is only recorded on the member (or nowhere, when
// the success is no member's any more). It returns an error only when the
// store fails or ctx ends (after the verifications in flight returned); a
// verification whose ctx ended records nothing.
func (e *Engine) VerifyPending(ctx context.Context) (int, error) {
	type key struct {
		project  string
		pipeline int64
	}
	type outcome struct {
		key     key
		err     error
		stopped bool
	}
	var (
		n        int
		firstErr error
		inFlight = map[key]bool{}
		done     = make(chan outcome)
	)
	// Verifications queued by another replica wake nobody here: the
	// queue is read again every PollInterval while some are in flight.
	poll := time.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()
	for {
		// Start what is queued and not in flight, while slots are free.
		if firstErr == nil && ctx.Err() == nil && len(inFlight) < e.cfg.VerifyConcurrency {
			var tasks []VerifyTask
			err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
				var err error
				tasks, err = tx.VerifyTasks(ctx, verifyBatch)
				return err
			})
			if err != nil {
				firstErr = fmt.Errorf("verify: read queue: %w", err)
			}
			for _, task := range tasks {
				k := key{task.Project, task.PipelineID}
				if inFlight[k] || len(inFlight) >= e.cfg.VerifyConcurrency {
					continue
				}
				inFlight[k] = true
				go func() {
					res := e.verifyOne(ctx, task)
					if ctx.Err() != nil {
						done <- outcome{key: k, stopped: true} // the task stays queued
						return
					}
					done <- outcome{key: k, err: e.applyVerification(ctx, task, res)}
				}()
			}
		}
		if len(inFlight) == 0 {
			if firstErr != nil {
				return n, firstErr
			}
			return n, ctx.Err()
		}
		select {
		case o := <-done:
			delete(inFlight, o.key)
			switch {
			case o.stopped:
			case o.err != nil:
				if firstErr == nil {
					firstErr = o.err
				}
			default:
				n++
			}
		case <-e.verifyC: // queued meanwhile: read the queue again
		case <-poll.C:
		}
	}
}

// verifyOne asks the Verifier, within Config.VerifyTimeout.
func (e *Engine) verifyOne(ctx context.Context, task VerifyTask) Verification {
	if e.cfg.Verifier == nil || e.cfg.Verify == VerifyOff {
		return Verification{State: ImageUnknown, Detail: "not verified: images.verify is off"}
	}
	vctx, cancel := context.WithTimeout(ctx, e.cfg.VerifyTimeout)
	defer cancel()
	res := e.cfg.Verifier.Verify(vctx, VerifyRequest{Project: task.Project, ProjectID: task.ProjectID,
		PipelineID: task.PipelineID, ChainID: task.ChainID})
	if vctx.Err() != nil && ctx.Err() == nil {
		return Verification{State: ImageUnknown, Detail: fmt.Sprintf("no verdict within %s", e.cfg.VerifyTimeout)}
	}
	switch res.State {
	case ImageFresh, ImageStale, ImageUnknown, ImagePinned:
	default:
		res = Verification{State: ImageUnknown, Detail: fmt.Sprintf("the verifier answered %q: %s", res.State, res.Detail)}
	}
	return res
}

// applyVerification removes task from the queue and applies its verdict.
func (e *Engine) applyVerification(ctx context.Context, task VerifyTask, res Verification) error {
	err := e.update(ctx, nil, func(t *txn) error { return t.applyVerification(task, res) })
	if err != nil {
		return fmt.Errorf("apply verification of %s pipeline %d: %w", task.Project, task.PipelineID, err)
	}
	return nil
}

func (t *txn) applyVerification(task VerifyTask, res Verification) error {
	if err := t.tx.DoneVerify(t.ctx, task.Project, task.PipelineID); err != nil {
		return err
	}
	t.after = append(t.after, func() {
		t.e.log.Info("images verified", "project", task.Project, "pipeline_id", task.PipelineID,
			"state", string(res.State), "detail", res.Detail)
	})
	c, m := t.verifiedMember(task)
	if m == nil {
		return nil // no member's build (any more): recorded by the Verifier only
	}
	c.changed(m)
	c.touch(t.now)
	m.Verified, m.VerifyDetail = res.State, res.Detail
	m.Images = res.Images
	if m.State == Success {
		// Report: shown, never acted on; but a member pinning it waits
		// for its digest (enqueuePins), and looks again.
		return t.settlePinners(c, m)
	}
	switch {
	case res.State != ImageStale || t.e.cfg.Verify != VerifyEnforce:
		m.State, m.Why = Success, ""
	case !m.NoCache:
		m.State, m.Why, m.NoCache = Pending, "stale: "+res.Detail+"; rebuilding without cache", true
		if _, err := t.enqueuePipeline(c, m); err != nil {
			return err
		}
	default:
		m.State, m.Why = Stale, "still stale after a rebuild without cache: "+res.Detail
	}
	return t.settle(c)
}

// settlePinners settles c again for the waiting members that pin u,
// whose verdict just arrived: their pin moves to its digest.
func (t *txn) settlePinners(c *Chain, u *Member) error {
	found := false
	for _, d := range c.Members {
		if d.State == Waiting && slices.Contains(d.Pinned, u.Project) {
			c.changed(d)
			found = true
		}
	}
	if !found {
		return nil
	}
	return t.settle(c)
}

// verifiedMember returns the member whose build task verifies: its
// project's member in an active chain, verifying or succeeded with the
// task's pipeline.
func (t *txn) verifiedMember(task VerifyTask) (*Chain, *Member) {
	for _, c := range t.chains {
		if !c.State.Active() || c.IsValidation() {
			continue
		}
		if m := c.member(task.Project); m != nil && m.PipelineID == task.PipelineID && (m.State == Verifying || m.State == Success) {
			return c, m
		}
	}
	return nil, nil
}

// RunVerify verifies queued successes until ctx ends: at once when woken
// (NotifyVerify: a transaction of this engine queued one), and every
// PollInterval for those queued by other processes or before a restart.
// The daemon runs it on the leader only, so a verification is not done by
// several replicas at once. Errors are logged and retried.
func (e *Engine) RunVerify(ctx context.Context) error {
	for {
		if _, err := e.VerifyPending(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("verification failed", "err", err)
		}
		if !e.sleep(ctx, e.verifyC, e.cfg.PollInterval) {
			return nil
		}
	}
}
