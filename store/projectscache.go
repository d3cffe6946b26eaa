package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gitlab.com/depsd/depsd/scan"
)

// projectsCache keeps the stored projects as this process's last scan
// wrote them, with the projects' generation they are at, so
// that a scan does not read every project again while nothing else
// changed them: a rescan after a push of a dependency file reads the
// projects pushed to from GitLab and, before this, every stored project
// from the store (about 190 ms of CPU at 10,000 projects, at one rescan
// a second a fifth of a core, in bursts every webhook's answer shares).
//
// It is as true as a read: it is taken only while the generation is the
// one it is at (every change of the projects moves it: a scan, a pipeline
// identification learned), and a scan's write puts into it the rows it
// read back of the projects it wrote and, of the others, the rows it kept,
// in readProjects' order (by path, bytewise on both stores). Where a
// scan writes many projects it is dropped instead: reading them back
// would hold the write lock. Unused for projectsCacheTTL, it lets go of
// them.
type projectsCache struct {
	mu         sync.Mutex
	generation int64
	projects   []scan.Project // nil: nothing kept
	ttl        time.Duration
	drop       *time.Timer
}

func newProjectsCache() *projectsCache { return &projectsCache{ttl: projectsCacheTTL} }

// projectsCacheTTL is how long the kept projects outlive their last use:
// a stream of pushes rescans every second (daemon.pushRescanGap); a
// quiet instance keeps no copy of its projects between its periodic
// rescans (every 6 hours by default).
const projectsCacheTTL = time.Minute

// maxReadBack bounds the projects a scan's write reads back to keep the
// cache; past it the cache is dropped.
const maxReadBack = 64

// at returns the kept projects (a copy of the list: callers may reorder
// it, not change what its projects share) if they are at generation.
func (c *projectsCache) at(generation int64) ([]scan.Project, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.projects == nil || c.generation != generation {
		return nil, false
	}
	c.keepAlive()
	return slices.Clone(c.projects), true
}

// keep takes projects (in readProjects' order) as the stored projects at
// generation; nil drops what was kept.
func (c *projectsCache) keep(generation int64, projects []scan.Project) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation, c.projects = generation, projects
	if projects != nil {
		c.keepAlive()
	}
}

// clear lets go of the projects and stops the timer (Store.Close).
func (c *projectsCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.projects = nil
	if c.drop != nil {
		c.drop.Stop()
	}
}

// keepAlive (re)starts the timer that drops the projects. c.mu is held.
func (c *projectsCache) keepAlive() {
	if c.drop != nil {
		c.drop.Reset(c.ttl)
		return
	}
	c.drop = time.AfterFunc(c.ttl, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.projects = nil
	})
}

// afterWrite is the stored projects once a scan's write of projects over
// old (as stored before it) commits: the projects it wrote (written) read
// back in tx, the others as they were; nil when more than maxReadBack
// were written.
func afterWrite(ctx context.Context, tx *sql.Tx, old map[int64]*scan.Project, projects []scan.Project, written []int64) ([]scan.Project, error) {
	if len(written) > maxReadBack {
		return nil, nil
	}
	fresh := map[int64]*scan.Project{}
	if len(written) > 0 {
		args := make([]any, len(written))
		marks := make([]string, len(written))
		for i, id := range written {
			args[i], marks[i] = id, fmt.Sprintf("$%d", i+1)
		}
		in := " WHERE %s IN (" + strings.Join(marks, ", ") + ")"
		read, err := queryProjects(ctx, tx, `SELECT `+projectColumns+` FROM projects`+fmt.Sprintf(in, "id"), args...)
		if err != nil {
			return nil, err
		}
		for i := range read {
			fresh[read[i].ID] = &read[i]
		}
		if err := loadDetails(ctx, tx, fresh, fmt.Sprintf(in, "project_id"), args...); err != nil {
			return nil, err
		}
	}
	out := make([]scan.Project, 0, len(projects))
	for _, p := range projects {
		switch q := fresh[p.ID]; {
		case q != nil:
			out = append(out, *q)
		case old[p.ID] != nil:
			out = append(out, *old[p.ID])
		default:
			return nil, fmt.Errorf("project %s: written but not read back", p.Path)
		}
	}
	slices.SortFunc(out, func(a, b scan.Project) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
