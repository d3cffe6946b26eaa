package daemon

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/webhook"
)

// graphState is the scanned graph and the set of projects in scope, swapped
// whole after each scan so readers never see a half-updated one.
type graphState struct {
	cur atomic.Pointer[scanned]
	// projectsChanged, if set, is told the projects of each graph loaded,
	// as deciding what they publish needs them (imageVerifier).
	projectsChanged func([]verify.Project)
	// registriesChanged, if set, is told the hosts of the projects'
	// registry prefixes with each graph loaded (registryPolicy).
	registriesChanged func(hosts []string)
	// keepPaths: keep each project's path by id (projectPath), for the
	// webhook handler to tell which hooked group a project is in. Only
	// with group hooks: at 50,000 projects the paths cost a few MB.
	keepPaths bool
}

type scanned struct {
	graph *deps.Graph
	ids   map[int64]bool
	paths map[int64]string // keepPaths only
	// scan is when the stored scan read last started (zero: none), so
	// that followScans reloads only for a newer one.
	scan time.Time
}

func newGraphState() *graphState { return &graphState{} }

// reload reads the stored graph and the ids of the stored projects (not
// the projects: at 50,000 projects their files and dependencies, read
// whole, doubled the memory a scan needs). The scan it notes is read
// first: a scan stored in between is then taken for newer and read again.
func (s *graphState) reload(ctx context.Context, st *store.Store) error {
	meta, _, err := st.LastScan(ctx)
	if err != nil {
		return err
	}
	ids, err := st.ProjectIDs(ctx)
	if err != nil {
		return err
	}
	g, err := st.Graph(ctx)
	if err != nil {
		return err
	}
	var paths map[int64]string
	if s.keepPaths {
		if paths, err = st.ProjectPaths(ctx); err != nil {
			return err
		}
	}
	if s.registriesChanged != nil {
		hosts, err := st.RegistryHosts(ctx)
		if err != nil {
			return err
		}
		s.registriesChanged(hosts)
	}
	if s.projectsChanged != nil {
		// What projects publish: only what deciding it needs (no file,
		// only the dependencies that count), and let go.
		projects, err := st.VerifyProjects(ctx)
		if err != nil {
			return err
		}
		s.projectsChanged(projects)
	}
	s.cur.Store(&scanned{graph: g, ids: ids, paths: paths, scan: meta.StartedAt})
	return nil
}

func (s *graphState) loaded() bool { return s.cur.Load() != nil }

// loadedScan is when the scan the graph was read after started.
func (s *graphState) loadedScan() time.Time {
	if c := s.cur.Load(); c != nil {
		return c.scan
	}
	return time.Time{}
}

// graph implements chain.GraphSource.
func (s *graphState) graph(context.Context) (*deps.Graph, error) {
	if c := s.cur.Load(); c != nil {
		return c.graph, nil
	}
	return deps.NewGraph(), nil
}

// InScope implements webhook.Scope.
func (s *graphState) InScope(projectID int64) bool {
	c := s.cur.Load()
	return c != nil && c.ids[projectID]
}

// projectPath implements webhook.Options.ProjectPath (keepPaths).
func (s *graphState) projectPath(projectID int64) (string, bool) {
	c := s.cur.Load()
	if c == nil {
		return "", false
	}
	p, ok := c.paths[projectID]
	return p, ok
}

// recorder hands accepted webhook events to the engine's inbox through
// the group-committing chain.Recorder the daemon runs.
type recorder struct{ r *chain.Recorder }

func (r recorder) Record(ctx context.Context, ev webhook.Event) (bool, error) {
	return r.r.Record(ctx, ev.Key, chain.Event{Pipeline: ev.Pipeline, Push: ev.Push})
}

// observer exports the engine's events as metrics.
type observer struct{ m *metrics }

func (o observer) EventApplied(kind, outcome string) {
	// Outcomes carry details after a colon ("ignored: not default branch");
	// the label keeps the word before it to stay low-cardinality.
	result, _, _ := strings.Cut(outcome, ":")
	o.m.applied.WithLabelValues(kind, result).Inc()
}

func (o observer) PipelineCreated(_ string, adopted bool) {
	if adopted {
		o.m.triggers.WithLabelValues("adopted").Inc()
		return
	}
	o.m.triggers.WithLabelValues("created").Inc()
}

func (o observer) ActionError(_ string, permanent bool) {
	if permanent {
		o.m.apiErrors.WithLabelValues("false").Inc()
		return
	}
	o.m.apiErrors.WithLabelValues("true").Inc()
}

func (o observer) CommitStatus(state, outcome string) {
	o.m.statuses.WithLabelValues(state, outcome).Inc()
}

func (o observer) ChainEnded(state chain.State, d time.Duration) {
	o.m.chainDuration.WithLabelValues(string(state)).Observe(d.Seconds())
}
