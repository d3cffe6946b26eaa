package signin

import (
	"context"
	"crypto/subtle"
	"sync"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// Visible is what one person may see: the project paths GitLab listed for
// their token at At (public and internal projects, and those they are a
// member of).
type Visible struct {
	paths map[string]bool
	At    time.Time
}

// NewVisible is the set of paths, as GitLab listed them at at.
func NewVisible(paths []string, at time.Time) *Visible {
	v := &Visible{paths: make(map[string]bool, len(paths)), At: at}
	for _, p := range paths {
		v.paths[p] = true
	}
	return v
}

// Sees reports whether the person may see the project at path.
func (v *Visible) Sees(path string) bool { return v != nil && v.paths[path] }

// Len is how many projects the person may see.
func (v *Visible) Len() int {
	if v == nil {
		return 0
	}
	return len(v.paths)
}

// visibilityCache keeps each person's Visible for Config.VisibilityTTL.
type visibilityCache struct {
	mu      sync.Mutex
	entries map[int64]*visibilityEntry
}

type visibilityEntry struct {
	mu sync.Mutex // held while GitLab is asked, so a person's pages ask once
	v  *Visible
}

// visibleTo returns what p may see: from the cache while it is younger
// than VisibilityTTL and refresh is false, else listed again by GitLab
// with p's own token.
func (s *Service) visibleTo(ctx context.Context, p *Person, refresh bool) (*Visible, error) {
	c := &s.vis
	c.mu.Lock()
	e, ok := c.entries[p.ID]
	if !ok {
		if len(c.entries) > 100000 {
			clear(c.entries)
		}
		e = &visibilityEntry{}
		c.entries[p.ID] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	now := s.cfg.Now()
	if e.v != nil && !refresh && now.Sub(e.v.At) < s.cfg.VisibilityTTL {
		return e.v, nil
	}
	list, err := p.client.ListVisibleProjects(ctx, gitlab.VisibleFilter{})
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(list))
	for i, vp := range list {
		paths[i] = vp.Path
	}
	e.v = NewVisible(paths, now)
	return e.v, nil
}

// forget drops a person's cached visibility (sign-out).
func (c *visibilityCache) forget(userID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, userID)
}

func constantEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
