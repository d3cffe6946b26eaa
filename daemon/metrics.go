package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"gitlab.com/depsd/depsd/buildinfo"
	"gitlab.com/depsd/depsd/verify"
)

// metrics are depsd's Prometheus metrics, on a registry of their own (no
// process-wide default registry: tests run daemons side by side).
type metrics struct {
	registry      *prometheus.Registry
	events        *prometheus.CounterVec   // webhook deliveries by kind and outcome
	applied       *prometheus.CounterVec   // events applied by the engine by kind and result
	triggers      *prometheus.CounterVec   // pipeline creations by outcome
	apiErrors     *prometheus.CounterVec   // GitLab errors by retryable
	chainDuration *prometheus.HistogramVec // chains by final state
	queueDepth    *prometheus.GaugeVec     // pending inbox events and outbox actions
	lastScan      prometheus.Gauge
	scanDuration  prometheus.Gauge
	scanProjects  prometheus.Gauge
	scanWarnings  prometheus.Gauge
	fires         *prometheus.CounterVec // schedule fires by kind and outcome
	verifications *prometheus.CounterVec // image verifications by result
	imageStale    *prometheus.GaugeVec   // 1 for an image stale on some platform
	staleSeconds  *prometheus.GaugeVec   // how long an image has been stale
}

func newMetrics() *metrics {
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
			Name: "depsd_last_scan_success_timestamp_seconds", Help: "When the last successful scan finished (Unix time).",
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
			Name: "depsd_image_verifications_total", Help: "Images verified after a successful build, one per image and platform, by result (fresh, stale, unknown).",
		}, []string{"result"}),
		imageStale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_image_stale", Help: "1 when the image a project publishes was built on an older image of an upstream (on any platform), 0 otherwise, as last verified.",
		}, []string{"project", "image"}),
		staleSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "depsd_image_stale_seconds", Help: "How long the image has been stale: since its upstream moved away from the image's base (0 when not stale).",
		}, []string{"project", "image"}),
	}
	info := buildinfo.Get()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depsd_build_info", Help: "Always 1; the labels say which build of depsd runs.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	buildInfo.Set(1)
	m.registry.MustRegister(buildInfo, m.fires, m.verifications, m.imageStale, m.staleSeconds, m.events, m.applied, m.triggers, m.apiErrors, m.chainDuration, m.queueDepth,
		m.lastScan, m.scanDuration, m.scanProjects, m.scanWarnings,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
// dropped.
func (m *metrics) observeFreshness(rows []verify.Row, now time.Time) {
	type key struct{ project, image string }
	since := map[key]time.Time{}
	for _, r := range rows {
		k := key{r.Project, r.Image}
		s, seen := since[k]
		if !seen {
			since[k] = time.Time{}
		}
		if r.State == verify.StateStale && !r.StaleSince.IsZero() && (s.IsZero() || r.StaleSince.Before(s)) {
			since[k] = r.StaleSince
		}
	}
	m.imageStale.Reset()
	m.staleSeconds.Reset()
	for k, s := range since {
		stale, seconds := 0.0, 0.0
		if !s.IsZero() {
			stale, seconds = 1, max(now.Sub(s).Seconds(), 0)
		}
		m.imageStale.WithLabelValues(k.project, k.image).Set(stale)
		m.staleSeconds.WithLabelValues(k.project, k.image).Set(seconds)
	}
}
