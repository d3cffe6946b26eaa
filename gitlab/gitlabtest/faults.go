package gitlabtest

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fault makes the next Times requests (to Endpoint, or to any endpoint when
// Endpoint is empty) fail with Status before they are authenticated or
// handled. Endpoint names are written as in GitLab's documentation, e.g.
// "GET /groups/:id/projects"; see Server.Requests.
type Fault struct {
	Endpoint string
	// Status is the HTTP status answered, typically 429, 500, 502 or 503.
	Status int
	// RetryAfter is sent for 429 answers as Retry-After (whole seconds,
	// rounded up) and as RateLimit-Reset (epoch seconds).
	RetryAfter time.Duration
	// Times is how many requests fail; zero means one.
	Times int
}

// Fail queues a fault. Faults are consumed in the order they were queued.
func (s *Server) Fail(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.faults = append(s.stats.faults, &f)
}

// ClearFaults drops all queued faults.
func (s *Server) ClearFaults() {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.faults = nil
}

// Requests returns how many requests the endpoint received (faulted ones
// included). Names are "METHOD /path/:param" as in GitLab's docs:
//
//	GET /groups/:id
//	GET /groups/:id/projects
//	GET /projects
//	GET /projects/:id
//	GET /projects/:id/repository/files/:file_path/raw
//	GET /projects/:id/repository/branches/:branch
//	GET /projects/:id/repository/tree
//	GET /projects/:id/repository/blobs/:sha/raw
//	POST /projects/:id/pipeline
//	GET /projects/:id/pipelines
//	GET /projects/:id/pipelines/:pipeline_id
//	GET /projects/:id/pipelines/:pipeline_id/variables
//	GET /projects/:id/hooks
//	GET /projects/:id/hooks/:hook_id
//	POST /projects/:id/hooks
//	PUT /projects/:id/hooks/:hook_id
//	DELETE /projects/:id/hooks/:hook_id
//	GET /projects/:id/members/all/:user_id
//	POST /projects/:id/statuses/:sha
//	GET /projects/:id/repository/commits/:sha/statuses
//	GET /projects/:id/registry/repositories
//	GET /projects/:id/registry/repositories/:repository_id/tags
//	GET /projects/:id/registry/repositories/:repository_id/tags/:tag_name
//	DELETE /projects/:id/registry/repositories/:repository_id/tags/:tag_name
//	GET, POST /projects/:id/repository/tags; GET, DELETE …/tags/:tag_name
//	GET, POST /projects/:id/repository/branches; DELETE …/branches/:branch
//	GET /projects/:id/protected_branches
//	POST /projects/:id/repository/commits
//	GET, POST /projects/:id/merge_requests; GET, PUT …/merge_requests/:merge_request_iid
//	PUT …/merge_requests/:merge_request_iid/merge; GET …/:merge_request_iid/pipelines
//	GET, POST …/:merge_request_iid/notes; GET, PUT …/notes/:note_id
//	GET /oauth/authorize, POST /oauth/token, POST /oauth/revoke
//	POST /api/graphql (GraphQLEndpoint)
//	unknown
func (s *Server) Requests(endpoint string) int64 {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.counts[endpoint]
}

// TotalRequests returns how many requests the server received.
func (s *Server) TotalRequests() int64 {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.total
}

// RequestCounts returns a copy of the per-endpoint counts.
func (s *Server) RequestCounts() map[string]int64 {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return maps.Clone(s.stats.counts)
}

// ResetRequests zeroes the request counts and the in-flight maximum.
func (s *Server) ResetRequests() {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.counts = map[string]int64{}
	s.stats.total = 0
	s.stats.maxInFlight = s.stats.inFlight
}

// MaxInFlight returns the largest number of requests that were being served
// at the same time since the start or the last ResetRequests.
func (s *Server) MaxInFlight() int64 {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.maxInFlight
}

type stats struct {
	mu          sync.Mutex
	counts      map[string]int64
	total       int64
	inFlight    int64
	maxInFlight int64
	faults      []*Fault
}

// begin counts a request and returns the function that ends it.
func (st *stats) begin(name string) func() {
	st.mu.Lock()
	st.counts[name]++
	st.total++
	st.inFlight++
	st.maxInFlight = max(st.maxInFlight, st.inFlight)
	st.mu.Unlock()
	return func() {
		st.mu.Lock()
		st.inFlight--
		st.mu.Unlock()
	}
}

func (st *stats) takeFault(name string) (Fault, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, f := range st.faults {
		if f.Endpoint != "" && f.Endpoint != name {
			continue
		}
		f.Times--
		if f.Times == 0 {
			st.faults = append(st.faults[:i], st.faults[i+1:]...)
		}
		return *f, true
	}
	return Fault{}, false
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	if f.Status == http.StatusTooManyRequests {
		secs := int64((f.RetryAfter + time.Second - 1) / time.Second)
		h := w.Header()
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
		h.Set("RateLimit-Limit", "600")
		h.Set("RateLimit-Observed", "601")
		h.Set("RateLimit-Remaining", "0")
		reset := s.now().Add(time.Duration(secs) * time.Second)
		h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		h.Set("RateLimit-ResetTime", reset.UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("Retry later\n"))
		return
	}
	writeJSON(w, f.Status, map[string]string{"message": strconv.Itoa(f.Status) + " " + http.StatusText(f.Status)})
}
