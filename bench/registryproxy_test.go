package bench

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowRegistry is a reverse proxy in front of a real registry that delays
// every request by a fixed latency before passing it on (a registry across
// a network, as users have them, instead of one on loopback), counts the
// requests by kind, and can be told to hang: to answer nothing at all
// until the client gives up, as a registry behind a stuck load balancer
// does. Its address is what depsd is told the registry is.
type slowRegistry struct {
	// Addr is the proxy's host:port on 127.0.0.1.
	Addr string

	latency time.Duration
	srv     *httptest.Server
	hang    atomic.Bool
	closed  chan struct{}

	mu     sync.Mutex
	counts map[string]int // by requestKind
	spans  []span         // every request's, in order of arrival
}

// span is when one request arrived at the proxy and when its answer was
// written (zero while it is being answered).
type span struct{ Arrived, Answered time.Time }

// newSlowRegistry starts a proxy to the registry on target (host:port)
// that adds latency to every request; it stops when b ends.
func newSlowRegistry(b testing.TB, target string, latency time.Duration) *slowRegistry {
	b.Helper()
	p := &slowRegistry{latency: latency, closed: make(chan struct{}), counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := p.count(r)
		defer p.answered(i)
		if p.hang.Load() {
			select { // answer nothing until the client or the proxy gives up
			case <-r.Context().Done():
			case <-p.closed:
			}
			return
		}
		t := time.NewTimer(p.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.Addr = strings.TrimPrefix(p.srv.URL, "http://")
	b.Cleanup(func() {
		close(p.closed)
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

// requestKind sorts a registry API request: "ping" (GET /v2/),
// "manifest" (/v2/<name>/manifests/<reference>), "blob"
// (/v2/<name>/blobs/<digest>), "other".
func requestKind(r *http.Request) string {
	switch {
	case r.URL.Path == "/v2/" || r.URL.Path == "/v2":
		return "ping"
	case strings.Contains(r.URL.Path, "/manifests/"):
		return "manifest"
	case strings.Contains(r.URL.Path, "/blobs/"):
		return "blob"
	}
	return "other"
}

func (p *slowRegistry) count(r *http.Request) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[requestKind(r)]++
	p.spans = append(p.spans, span{Arrived: time.Now()})
	return len(p.spans) - 1
}

func (p *slowRegistry) answered(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spans[i].Answered = time.Now()
}

// SetHang makes the proxy answer nothing from now on (true), or answer
// again after its latency (false).
func (p *slowRegistry) SetHang(hang bool) { p.hang.Store(hang) }

// Requests returns how many requests arrived so far, all kinds together.
func (p *slowRegistry) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.spans)
}

// Spans returns the spans of the requests from the from-th on (Requests
// before them).
func (p *slowRegistry) Spans(from int) []span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.spans[min(from, len(p.spans)):])
}

// Counts returns how many requests of each kind arrived so far.
func (p *slowRegistry) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}
