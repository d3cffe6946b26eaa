package chain

import (
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Config holds the engine's dependencies and settings.
type Config struct {
	Store  Store       // required
	GitLab GitLab      // required to send actions and reconcile
	Graph  GraphSource // required
	Rescan Rescan      // called for push events; nil: pushes are only marked processed
	// RescanGap is the least time from the end of one rescan for pushes
	// to the start of the next: the pushes recorded meanwhile, and the
	// events behind them in the inbox, wait, and share the next rescan.
	// 0: none (the daemon waits 1 s).
	RescanGap time.Duration
	Mode      Mode // Full (default) or FirstLevel
	// Refs are the rules of `refs:` in depsd.yaml: which tags of a
	// project are releases, and what a rebuild of its releases runs on.
	Refs deps.RefRules
	// Expiry is how long a chain may run before it expires. Default 7 days.
	Expiry time.Duration
	// Lease is how long a worker owns an action it sends. It must exceed
	// the longest create-pipeline call. Default 5 minutes.
	Lease time.Duration
	// BackoffBase and BackoffMax bound the delay before an action that got
	// a retryable error is tried again: base·2^(attempts-1), capped.
	// Defaults 10 s and 10 min.
	BackoffBase, BackoffMax time.Duration
	// AdoptWindow is how far before an action's creation its pipeline is
	// looked for (clock skew between depsd and GitLab). Default 10 min.
	AdoptWindow time.Duration
	// ClockSkew is how far GitLab's clock may be behind depsd's: a resend
	// in a project without variables or input adopts pipelines created
	// since the action's claim less this. Default 1 minute.
	ClockSkew time.Duration
	// EventRetention is how long processed events (and so their
	// Idempotency-Keys) are kept. Default 7 days.
	EventRetention time.Duration
	// PollInterval is how often RunInbox and RunOutbox look for work
	// written by another process (`depsd rebuild`). Default 5 s.
	PollInterval time.Duration
	// InboxWait bounds how long a Reconcile round first waits for the
	// inbox to apply the webhooks already recorded (the daemon gives it
	// half its reconcile interval). Default 30 s.
	InboxWait time.Duration
	// CatchUpWindow bounds how far back CatchUp reads a project's
	// pipelines. Default 7 days.
	CatchUpWindow time.Duration
	// Owner names this engine's process incarnation in the claims it
	// makes (Action.ClaimedBy). Set it only when the process keeps its
	// liveness lease "alive:<Owner>" renewed and runs RunOutbox only while
	// that lease safely holds (the daemon stops it a third of the lease
	// before the lease could lapse): other replicas take over its claims
	// as soon as that lease runs out. Empty: claims last their full Lease.
	Owner string
	// SendConcurrency bounds the pipeline creations in flight: a rebuild
	// of a base image can release hundreds at once. Default 4; the daemon
	// uses the GitLab client's own bound (gitlab.concurrency).
	SendConcurrency int
	// Verifier, when set, verifies the images of every successful build
	// of a project that publishes some (verify.go); Verify says what the
	// verdict does: VerifyEnforce (default), VerifyReport or VerifyOff.
	Verifier Verifier
	Verify   VerifyMode
	// VerifyTimeout bounds one build's verification: the member's
	// descendants never wait longer for it (the verdict is then unknown).
	// Default 1 minute.
	VerifyTimeout time.Duration
	// VerifyConcurrency bounds the verifications in flight. Default 4.
	VerifyConcurrency int
	// Pins say, per project, what a member that pins a changed upstream
	// by digest gets (pins.go): a merge request moving its pins (the
	// default), one set to merge when its pipeline succeeds, or nothing
	// (it is skipped). PinTimeout is how long its merge request may stay
	// unmerged before the member is skipped (default 7 days);
	// PinInterval how often RunPins reads the open ones (default 1
	// minute). Moving pins needs GitLab to implement Repository.
	Pins        PinRules
	PinTimeout  time.Duration
	PinInterval time.Duration
	// DepsOptions are the platforms a Containerfile is read for when
	// its pins move (as scans read it).
	DepsOptions deps.Options
	// ChainURL, when set, is the link to a chain's page that a pin merge
	// request's description gives.
	ChainURL func(chainID int64) string
	// Statuses, when set, keeps each chain's progress as a commit status
	// on the commit of every pipeline whose success started it
	// (commitstatus.go); RunStatuses sends them. Nil: none.
	Statuses *ChainStatusOptions
	// Premerge, when set, validates the merge requests of the projects
	// its rules cover (premerge.go); RunValidations does its GitLab and
	// registry work. Nil: no validations.
	Premerge *PremergeOptions
	Now      func() time.Time // default time.Now
	Logger   *slog.Logger     // default: discard
	Observer Observer         // default: none
}

// Engine applies events and rebuild requests to the chains in the store and
// sends the resulting actions. Its methods are safe for concurrent use, and
// several engines may share one store. It keeps no chain state of its own:
// every operation loads the active chains in its store transaction (from
// the store's cache, validated by each chain's version), and what it
// derives from a chain to apply an event in time proportional to what
// the event changes travels with the chain (track.go).
//
// Where ARCHITECTURE.md ("Chain semantics") is silent, the engine decides so:
//   - A success of P starts a chain only if P has something downstream
//     (off cycles); a rebuild always starts one, and is an error for a
//     project on a cycle.
//   - A project is a member of at most one active (running or blocked)
//     full-mode chain: any overlap merges, into the oldest chain (see
//     startFull for the per-member rules, including requeue and reset).
//   - "skipped" counts as failed (nothing was built), "manual" as still
//     running; a status never moves a member backwards.
//   - A success of a failed or canceled member's project, from any pipeline,
//     unblocks it and starts no new chain.
//   - A member that pins an in-chain upstream by digest is not rebuilt
//     when that upstream changed: once its upstreams succeeded, a merge
//     request moves its pins (WaitingMerge), and the merge's pipeline on
//     its branch is its build (pins.go). One of its upstreams it does not
//     pin that changed does not make it build apart: the merge builds it
//     on both. When none of the upstreams it pins changed, it is built as
//     any other.
//   - A skipped member (docs/design/nodes.md) is settled and unchanged:
//     its descendants wait for it no more, one whose in-chain upstreams
//     all ended skipped is skipped too, and a chain of successes and skips
//     is finished. No status moves it; a change merged into its chain
//     resets it to waiting like a finished member.
//   - Expiry counts from the chain's last start or merge, so work merged
//     into an old chain gets the full period.
//   - The members and their in-chain upstreams are fixed from the graph
//     when a chain starts or merges; a rescan does not reshape running
//     chains.
//   - First-level chains hold the direct dependents of one success (or,
//     for a rebuild, the project itself); they never merge or block.
//   - A build is verified when its project publishes images (Verifier):
//     under VerifyEnforce a full-mode member whose pipeline succeeded is
//     Verifying (unfinished: its descendants wait) until the verdict; a
//     stale one is rebuilt once without cache (NoCache), and is Stale
//     (broken, like a failure) if that build is stale too; fresh and
//     unknown succeed. A later success of a stale member's project
//     unblocks it as it does a failed one. Successes that are no member's
//     build (a chain's root, first-level mode) and every success under
//     VerifyReport are verified and recorded, never acted on.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	obs     Observer
	now     func() time.Time
	inboxC  chan struct{}
	outboxC chan struct{}
	verifyC chan struct{}
	pinsC   chan struct{}
	statusC chan struct{}
	// validateC wakes RunValidations; imageReads counts the failed reads
	// of members' validation images (validationrun.go).
	validateC    chan struct{}
	imageReadsMu sync.Mutex
	imageReads   map[string]int
	sendHook     func(Action) // tests: called after a claim, before GitLab is asked
	// statusHooks (tests) look into the commit status sender.
	statusHooks statusHooks
	// noInputs: the GitLab is older than 17.10 (no pipeline inputs), so a
	// project refusing variables gets bare pipelines (SetPipelineInputs).
	noInputs atomic.Bool
	// fullPathOnly (tests) applies every inbox event on the full path,
	// without cheapOutcome's shortcut: the reference the cheap path is
	// compared with.
	fullPathOnly bool
	// inboxRuns counts the ProcessInbox calls running (inboxIdle).
	inboxRuns atomic.Int32
	// lastRescan is when the last rescan for pushes ended (UnixNano;
	// 0: none yet), for RescanGap.
	lastRescan atomic.Int64
	// inboxWaitHook (tests) is called when the reconciler waits for the
	// inbox to apply a backlog.
	inboxWaitHook func()

	// abandoned are the claims whose send ended without an outcome in the
	// store (the context ended, or the store failed): RunOutbox gives them
	// back when it starts its next round, instead of leaving the actions
	// claimed until their Lease runs out.
	abandonMu sync.Mutex
	abandoned map[string]Action
	// dueMu guards dueSenders: how many senders have creates due (and
	// Rebuild calls run), for the client's hold on background requests
	// (holdNormal).
	dueMu      sync.Mutex
	dueSenders int
	// outbox is RunOutbox's senders while it runs (nil otherwise): a
	// transaction that queues an action claims it for them and hands it
	// over once committed (senders.reserve).
	outbox atomic.Pointer[senders]
	// sent are the senders' outcomes waiting to be recorded together
	// (recordSent).
	sent sentRecords
}

// SetPipelineInputs says whether the GitLab takes pipeline inputs (17.10
// and later; the daemon reads GET /version at start). Without them a
// project that refuses variables is not asked with the depsd_action_id
// input: an older GitLab would create the pipeline without it. Safe to
// call at any time.
func (e *Engine) SetPipelineInputs(ok bool) { e.noInputs.Store(!ok) }

// New checks cfg and returns an engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("chain engine: no store")
	}
	if cfg.Graph == nil {
		return nil, errors.New("chain engine: no graph source")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = Full
	case Full, FirstLevel:
	default:
		return nil, errors.New("chain engine: unknown mode " + strconv.Quote(string(cfg.Mode)))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Expiry, 7*24*time.Hour)
	def(&cfg.Lease, 5*time.Minute)
	def(&cfg.BackoffBase, 10*time.Second)
	def(&cfg.BackoffMax, 10*time.Minute)
	def(&cfg.AdoptWindow, 10*time.Minute)
	def(&cfg.ClockSkew, time.Minute)
	def(&cfg.EventRetention, 7*24*time.Hour)
	def(&cfg.PollInterval, 5*time.Second)
	def(&cfg.InboxWait, 30*time.Second)
	def(&cfg.CatchUpWindow, 7*24*time.Hour)
	if cfg.SendConcurrency <= 0 {
		cfg.SendConcurrency = 4
	}
	switch cfg.Verify {
	case "":
		cfg.Verify = VerifyEnforce
	case VerifyOff, VerifyReport, VerifyEnforce:
	default:
		return nil, errors.New("chain engine: unknown verification mode " + strconv.Quote(string(cfg.Verify)))
	}
	def(&cfg.VerifyTimeout, time.Minute)
	def(&cfg.PinTimeout, 7*24*time.Hour)
	def(&cfg.PinInterval, time.Minute)
	for _, m := range append([]PinMode{cfg.Pins.Default}, func() []PinMode {
		var ms []PinMode
		for _, o := range cfg.Pins.Overrides {
			ms = append(ms, o.Mode)
		}
		return ms
	}()...) {
		if m != "" && !slices.Contains(PinModes(), m) {
			return nil, errors.New("chain engine: unknown pins mode " + strconv.Quote(string(m)))
		}
	}
	if st := cfg.Statuses; st != nil {
		if st.GitLab == nil {
			return nil, errors.New("chain engine: commit statuses without a GitLab client")
		}
		o := *st
		def(&o.Interval, 5*time.Second)
		cfg.Statuses = &o
	}
	if pm := cfg.Premerge; pm != nil {
		if pm.GitLab == nil || pm.Registry == nil {
			return nil, errors.New("chain engine: validations without a GitLab client or a registry")
		}
		o := *pm
		def(&o.Interval, time.Minute)
		def(&o.NoteInterval, 5*time.Second)
		for _, r := range o.Rules {
			if r.Depth != "" && !slices.Contains(ValidationDepths(), r.Depth) {
				return nil, errors.New("chain engine: unknown validation depth " + strconv.Quote(string(r.Depth)))
			}
		}
		cfg.Premerge = &o
	}
	if cfg.VerifyConcurrency <= 0 {
		cfg.VerifyConcurrency = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Engine{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "chain"),
		obs:     cfg.Observer,
		now:     func() time.Time { return cfg.Now().UTC() },
		inboxC:  make(chan struct{}, 1),
		outboxC: make(chan struct{}, 1),
		verifyC: make(chan struct{}, 1),
		pinsC:   make(chan struct{}, 1),
		statusC: make(chan struct{}, 1),

		validateC: make(chan struct{}, 1),
	}, nil
}

// Mode returns the engine's mode.
func (e *Engine) Mode() Mode { return e.cfg.Mode }

// NotifyInbox wakes RunInbox: an event was recorded. It never blocks.
func (e *Engine) NotifyInbox() { wake(e.inboxC) }

// inboxIdle reports whether this engine's inbox processor has nothing to
// do: neither running nor woken. The Recorder then applies a quiet
// recording itself (applyNow); otherwise its events wait behind the ones
// being applied anyway.
func (e *Engine) inboxIdle() bool { return e.inboxRuns.Load() == 0 && len(e.inboxC) == 0 }

// NotifyOutbox wakes RunOutbox: an action was written. It never blocks.
func (e *Engine) NotifyOutbox() { wake(e.outboxC) }

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// backoff is the delay before attempt n+1 of an action tried n times.
func (e *Engine) backoff(n int) time.Duration {
	d := e.cfg.BackoffBase
	for i := 1; i < n && d < e.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, e.cfg.BackoffMax)
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }
