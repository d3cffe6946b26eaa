package scan

import (
	"crypto/sha256"
	"slices"
	"sync"

	"gitlab.com/depsd/depsd/deps"
)

// analyses keeps what analyzeFile found, by all it depends on: every scan
// analyses every stored file again against the current projects (a
// rescan after a push too), and parsing them again (BuildKit's parser
// compiles regular expressions for each file) was a third of a rescan's
// CPU, though the files rarely change.
var analyses = analysisCache{max: 20000}

// analysisCache maps a file's name, content and the options it was read
// with to its analysis. Bounded: full, it starts over (a few hundred bytes
// an entry, so some MB at most).
type analysisCache struct {
	mu      sync.Mutex
	max     int
	entries map[[sha256.Size]byte]deps.FileAnalysis
}

// analysisKey hashes what an analysis depends on.
func analysisKey(f File, instanceHost string, opts deps.Options) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range []string{f.Name, instanceHost} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, p := range opts.Platforms {
		h.Write([]byte(p.String()))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	h.Write(f.Content)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// get returns the analysis of f, from the cache or from analyze. The
// slices returned are the caller's own.
func (c *analysisCache) get(f File, instanceHost string, opts deps.Options, analyze func() deps.FileAnalysis) deps.FileAnalysis {
	k := analysisKey(f, instanceHost, opts)
	c.mu.Lock()
	a, ok := c.entries[k]
	c.mu.Unlock()
	if !ok {
		a = analyze()
		c.mu.Lock()
		if c.entries == nil || len(c.entries) >= c.max {
			c.entries = make(map[[sha256.Size]byte]deps.FileAnalysis)
		}
		c.entries[k] = a
		c.mu.Unlock()
	}
	return deps.FileAnalysis{
		Dependencies: slices.Clone(a.Dependencies),
		Warnings:     slices.Clone(a.Warnings),
		Built:        slices.Clone(a.Built),
	}
}
