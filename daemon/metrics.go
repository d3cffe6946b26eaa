package daemon

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"gitlab.com/depsd/depsd/buildinfo"
	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/dashboard"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/webhook"
)

// metrics are depsd's Prometheus metrics, on a registry of their own (no
// process-wide default registry: tests run daemons side by side).
type metrics struct {
	registry      *prometheus.Registry
	events        *prometheus.CounterVec   // webhook deliveries by kind and outcome
	applied       *prometheus.CounterVec   // events applied by the engine by kind and result
	triggers      *prometheus.CounterVec   // pipeline creations by outcome
	statuses      *prometheus.CounterVec   // chains' commit status sends by state and outcome
	apiErrors     *prometheus.CounterVec   // GitLab errors by retryable
	chainDuration *prometheus.HistogramVec // chains by final state
	queueDepth    *prometheus.GaugeVec     // pending inbox events and outbox actions
	lastScan      prometheus.Gauge
	scanDuration  prometheus.Gauge
	scanProjects  prometheus.Gauge
	scanWarnings  prometheus.Gauge
	fires         *prometheus.CounterVec // schedule fires by kind and outcome

	// What the alerts in packaging/prometheus/depsd-alerts.yml watch,
	// refreshed by exportState (and jobRuns by every).
	chains         *prometheus.GaugeVec   // active chains by state
	validations    prometheus.Gauge       // validations running
	members        *prometheus.GaugeVec   // the active chains' members by state
	blockedLongest prometheus.Gauge       // seconds the longest-blocked chain has not moved
	storeUp        prometheus.Gauge       // 1 when the store answered the last look
	replicas       prometheus.Gauge       // processes with a current liveness lease
	webhooks       *prometheus.GaugeVec   // depsd's hooks by the state the last check left them in
	jobRuns        *prometheus.CounterVec // leader jobs' runs by task and outcome
	verifications  *prometheus.CounterVec // image verifications by result
	imagesByState  *prometheus.GaugeVec   // images per verification state
	imageStale     *prometheus.GaugeVec   // 1 for an image stale on some platform (off: how many are)
	projectLabels  bool                   // metrics.project_labels: on
	staleSeconds   *prometheus.GaugeVec   // how long an image has been stale
}

// Hook states of depsd_webhooks (dashboard.HookState), all exported so
// that a state with no hook reads 0 rather than nothing.
var hookStates = []string{"ok", "missing", "disabled", "failing"}

// newMetrics builds the metrics. projectLabels (metrics.project_labels:
// on) keeps a series per project and image where a metric is about one
// (depsd_image_stale, depsd_image_stale_seconds); otherwise those are
// aggregated into one series each and /metrics names no project.
func newMetrics(projectLabels bool) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_webhook_events_total", Help: "Webhook deliveries received, by event kind and outcome.",
		}, []string{"kind", "outcome"}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_events_applied_total", Help: "Recorded events applied by the chain engine, by kind and result.",
		}, []string{"kind", "result"}),
		triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_pipeline_triggers_total", Help: "Pipelines depsd created (outcome created), or adopted after a crash (adopted).",
		}, []string{"outcome"}),
		statuses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_commit_statuses_total",
			Help: "Sends of the chains' commit statuses (gitlab.commit_status), by the state sent and the outcome: posted, unchanged (GitLab showed it already), retry, refused (an invalid transition), gave_up.",
		}, []string{"state", "outcome"}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_gitlab_api_errors_total", Help: "Errors from the GitLab API while sending actions, by whether they are retried.",
		}, []string{"retryable"}),
		chainDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "depsd_chain_duration_seconds", Help: "Time from the start of a chain to its end, by final state.",
			Buckets: prometheus.ExponentialBuckets(30, 2, 12), // 30 s … ~17 h
		}, []string{"state"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_queue_depth", Help: "Work waiting: recorded events not yet applied (inbox), actions not yet sent (outbox), successful builds whose images are not yet verified (verify).",
		}, []string{"queue"}),
		lastScan: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_last_scan_success_timestamp_seconds", Help: "When the last successful scan of the whole scope finished (Unix time).",
		}),
		scanDuration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_last_scan_duration_seconds", Help: "How long the last successful scan took.",
		}),
		scanProjects: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_projects", Help: "Projects in scope at the last scan.",
		}),
		scanWarnings: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_dependency_warnings", Help: "Warnings in dependency files at the last scan.",
		}),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_schedule_fires_total", Help: "Schedule fires (rebuild, job such as the maintenance rescan, image watch check), by outcome.",
		}, []string{"kind", "outcome"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_image_verifications_total", Help: "Images verified after a successful build, one per image and platform, by result (stale, pinned, unknown, fresh).",
		}, []string{"result"}),
		imagesByState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_images", Help: "Images as last verified, by state (stale, pinned, unknown, fresh): an image counts once, in its stalest platform's state.",
		}, []string{"state"}),
		imageStale:    staleGauge(projectLabels),
		staleSeconds:  staleSecondsGauge(projectLabels),
		projectLabels: projectLabels,
		chains: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_chains", Help: "Active chains, by state (running, blocked).",
		}, []string{"state"}),
		validations: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_validations_running", Help: "Validations of merge requests running (premerge; not counted in depsd_chains).",
		}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_chain_members", Help: "Members of the active chains, by state (every member state, waiting-merge and skipped included).",
		}, []string{"state"}),
		blockedLongest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_chain_blocked_longest_seconds",
			Help: "How long the blocked chain that has waited longest has not moved (0: none blocked).",
		}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_store_up", Help: "1 when the store (SQLite file or PostgreSQL) answered the last look, 0 when it did not.",
		}),
		replicas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depsd_replicas", Help: "depsd processes sharing the store whose liveness lease is current, as this one read them last.",
		}),
		webhooks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_webhooks", Help: "depsd's project hooks by the state the last check left them in (ok, missing, disabled, failing).",
		}, []string{"state"}),
		jobRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depsd_background_job_runs_total", Help: "Runs of the leader's background jobs (reconcile, catch-up), by task and outcome.",
		}, []string{"task", "outcome"}),
	}
	// Series whose labels are known in advance are exported from the start
	// (at 0): an alert taking a counter's increase sees its first step, and
	// a dashboard's query finds the series before anything happened.
	for _, task := range []string{jobReconcile, jobCatchUp} {
		for _, outcome := range []string{"success", "failure"} {
			m.jobRuns.WithLabelValues(task, outcome)
		}
	}
	for _, kind := range []string{"pipeline", "push"} {
		for _, outcome := range []string{webhook.OutcomeAccepted, webhook.OutcomeDuplicate, webhook.OutcomeIgnored,
			webhook.OutcomeUnauthorized, webhook.OutcomeMalformed, webhook.OutcomeTooLarge, webhook.OutcomeError} {
			m.events.WithLabelValues(kind, outcome)
		}
	}
	m.triggers.WithLabelValues("created")
	m.triggers.WithLabelValues("adopted")
	m.apiErrors.WithLabelValues("true")
	m.apiErrors.WithLabelValues("false")
	for _, state := range chain.CommitStates() {
		for _, outcome := range []string{chain.StatusPosted, chain.StatusRefused, chain.StatusGaveUp} {
			m.statuses.WithLabelValues(string(state), outcome)
		}
	}
	m.chainDuration.WithLabelValues(string(chain.Finished))
	m.chainDuration.WithLabelValues(string(chain.Expired))
	m.queueDepth.WithLabelValues("inbox")
	m.queueDepth.WithLabelValues("outbox")
	m.queueDepth.WithLabelValues("verify")
	for _, s := range verify.States() {
		m.verifications.WithLabelValues(string(s))
		m.imagesByState.WithLabelValues(string(s))
	}
	for _, kind := range []scheduler.Kind{scheduler.KindRebuild, scheduler.KindJob, scheduler.KindWatch} {
		m.fires.WithLabelValues(string(kind), "ok")
		m.fires.WithLabelValues(string(kind), "error")
	}
	info := buildinfo.Get()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depsd_build_info", Help: "Always 1; the labels say which build of depsd runs.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	buildInfo.Set(1)
	m.registry.MustRegister(buildInfo, m.fires, m.verifications, m.imagesByState, m.imageStale, m.staleSeconds, m.events, m.applied, m.triggers, m.statuses, m.apiErrors, m.chainDuration, m.queueDepth,
		m.lastScan, m.scanDuration, m.scanProjects, m.scanWarnings,
		m.chains, m.validations, m.members, m.blockedLongest, m.storeUp, m.replicas, m.webhooks, m.jobRuns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watch exports what is read live from the GitLab client and the elector
// at each scrape.
func (m *metrics) watch(gl *gitlab.Client, leading func() bool) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "depsd_leader", Help: "1 while this process is the leader (schedules, reconciler, catch-up), else 0.",
		}, func() float64 { return boolGauge(leading()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "depsd_gitlab_requests_total", Help: "HTTP requests sent to GitLab's API, retries included.",
		}, func() float64 { return float64(gl.Requests()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "depsd_gitlab_throttled_total",
			Help: "GitLab answers saying its rate limit is exhausted (429, or 400 Too many pipelines), retries included.",
		}, func() float64 { return float64(gl.Throttled()) }),
	)
	for _, p := range []struct {
		name string
		p    gitlab.Priority
	}{{"urgent", gitlab.PriorityUrgent}, {"normal", gitlab.PriorityNormal}} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "depsd_gitlab_queue_wait_seconds_total",
			Help:        "Time GitLab requests waited for the client's own limits (concurrency, requests a minute), by priority (urgent: pipeline creations).",
			ConstLabels: prometheus.Labels{"priority": p.name},
		}, func() float64 { return gl.Queued(p.p).Waited.Seconds() }))
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observeState exports what exportState read: the chains' stats (ok false
// when the store did not answer), the live replicas and the last webhook
// check (checked false when there is none for the configured hook URL).
func (m *metrics) observeState(now time.Time, s chain.Stats, ok bool, replicas int, hooks dashboard.HookStatus, checked bool) {
	m.storeUp.Set(boolGauge(ok))
	if !ok {
		return
	}
	m.queueDepth.WithLabelValues("inbox").Set(float64(s.UnprocessedEvts))
	m.queueDepth.WithLabelValues("outbox").Set(float64(s.PendingActions))
	m.queueDepth.WithLabelValues("verify").Set(float64(s.VerifyQueued))
	m.chains.WithLabelValues(string(chain.Running)).Set(float64(s.ActiveChains - s.BlockedChains))
	m.chains.WithLabelValues(string(chain.Blocked)).Set(float64(s.BlockedChains))
	m.validations.Set(float64(s.ActiveValidations))
	for _, st := range chain.MemberStates() {
		m.members.WithLabelValues(string(st)).Set(float64(s.Members[st]))
	}
	longest := 0.0
	if !s.BlockedSince.IsZero() {
		longest = max(0, now.Sub(s.BlockedSince).Seconds())
	}
	m.blockedLongest.Set(longest)
	m.replicas.Set(float64(replicas))
	if !checked {
		return
	}
	counts := map[string]int{}
	for _, c := range hooks.Report.Changes {
		counts[hookStateAfter(c, hooks.Report.DryRun)]++
	}
	for _, st := range hookStates {
		m.webhooks.WithLabelValues(st).Set(float64(counts[st]))
	}
}

// hookStateAfter is the state a hook is in after the check that reported
// c: as found by a dry run (the check at the start of a leader's term);
// working again after a repair run created or re-enabled it (the health
// page shows the state it was found in, with what was done).
func hookStateAfter(c gitlab.HookChange, dryRun bool) string {
	if !dryRun && (c.Action == gitlab.HookCreated || c.Action == gitlab.HookReenabled) {
		return "ok"
	}
	return dashboard.HookState(c, dryRun)
}

// observeScan exports the result of a successful scan.
func (m *metrics) observeScan(finished time.Time, took time.Duration, projects, warnings int) {
	m.lastScan.Set(float64(finished.Unix()))
	m.scanDuration.Set(took.Seconds())
	m.scanProjects.Set(float64(projects))
	m.scanWarnings.Set(float64(warnings))
}

// observeFreshness sets the images' staleness gauges from the freshness
// rows (verify.Freshness): an image is stale when it is on any platform,
// for as long as its stalest platform. Images no longer listed are
// dropped. Each image counts once in depsd_images, in its stalest
// platform's state.
func (m *metrics) observeFreshness(rows []verify.Row, now time.Time) {
	type key struct{ project, image string }
	since := map[key]time.Time{}
	state := map[key]verify.State{}
	rank := func(s verify.State) int { return slices.Index(verify.States(), s) }
	for _, r := range rows {
		k := key{r.Project, r.Image}
		s, seen := since[k]
		if !seen {
			since[k] = time.Time{}
			state[k] = r.State
		}
		if rank(r.State) < rank(state[k]) {
			state[k] = r.State
		}
		if r.State == verify.StateStale && !r.StaleSince.IsZero() && (s.IsZero() || r.StaleSince.Before(s)) {
			since[k] = r.StaleSince
		}
	}
	m.imageStale.Reset()
	m.staleSeconds.Reset()
	counts := map[verify.State]int{}
	for _, s := range state {
		counts[s]++
	}
	for _, s := range verify.States() {
		m.imagesByState.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
	var staleImages, longest float64
	for k, s := range since {
		stale, seconds := 0.0, 0.0
		if !s.IsZero() {
			stale, seconds = 1, max(now.Sub(s).Seconds(), 0)
		}
		staleImages, longest = staleImages+stale, max(longest, seconds)
		if m.projectLabels {
			m.imageStale.WithLabelValues(k.project, k.image).Set(stale)
			m.staleSeconds.WithLabelValues(k.project, k.image).Set(seconds)
		}
	}
	if !m.projectLabels {
		m.imageStale.WithLabelValues().Set(staleImages)
		m.staleSeconds.WithLabelValues().Set(longest)
	}
}

// staleGauge is depsd_image_stale: per project and image, or one series.
func staleGauge(projectLabels bool) *prometheus.GaugeVec {
	if projectLabels {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_image_stale", Help: "1 when the image a project publishes was built on an older image of an upstream (on any platform), 0 otherwise, as last verified.",
		}, []string{"project", "image"})
	}
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "depsd_image_stale", Help: "How many of the images projects publish were built on an older image of an upstream (on any platform), as last verified (metrics.project_labels: on gives a series per project and image).",
	}, nil)
}

// staleSecondsGauge is depsd_image_stale_seconds: per project and image,
// or the longest.
func staleSecondsGauge(projectLabels bool) *prometheus.GaugeVec {
	if projectLabels {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_image_stale_seconds", Help: "How long the image has been stale: since its upstream moved away from the image's base (0 when not stale).",
		}, []string{"project", "image"})
	}
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "depsd_image_stale_seconds", Help: "How long the image stale the longest has been: since its upstream moved away from the image's base (0 when none is stale; metrics.project_labels: on gives a series per project and image).",
	}, nil)
}
