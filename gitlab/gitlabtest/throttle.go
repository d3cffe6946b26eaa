package gitlabtest

import (
	"fmt"
	"net/http"
	"time"
)

// PipelineCreationLimit is GitLab's rate limit on pipeline creation (Admin >
// Settings > Network > Pipelines Rate Limits): at most so many create
// requests per minute for one combination of project, commit and user, and
// per user across all projects. Zero disables a limit, as on a
// self-managed instance by default; gitlab.com allows 25 per project,
// commit and user.
//
// Like GitLab, the fake counts every create request that got as far as the
// limit (a ref that does not exist is refused before), throttled ones
// included, in fixed windows of one minute of the server's clock, and
// answers a request over either limit with 400
// {"message":{"base":["Too many pipelines created in the last minute. Try again later."]}}
// and creates nothing. The fake has one user, the token's.
type PipelineCreationLimit struct {
	PerProjectCommitUser int
	PerUser              int
}

// TooManyPipelines is GitLab's message for a throttled pipeline creation.
const TooManyPipelines = "Too many pipelines created in the last minute. Try again later."

// SetPipelineCreationLimit changes the pipeline creation rate limit and
// restarts its counts.
func (s *Server) SetPipelineCreationLimit(l PipelineCreationLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createLimit = l
	s.createCounts = nil
}

// createThrottle holds the create requests counted in the current window.
type createThrottle struct {
	window int64            // unix minute the counts are of
	counts map[string]int64 // "user" and "project:<id>:<sha>"
}

// throttledCreate counts one create request for the project and commit and
// reports whether it is over the limit. Callers hold s.mu.
func (s *Server) throttledCreate(p *project, sha string) bool {
	l := s.createLimit
	if l.PerProjectCommitUser <= 0 && l.PerUser <= 0 {
		return false
	}
	window := s.now().Unix() / int64(time.Minute/time.Second)
	if s.createCounts == nil || s.createCounts.window != window {
		s.createCounts = &createThrottle{window: window, counts: map[string]int64{}}
	}
	c := s.createCounts.counts
	key := fmt.Sprintf("project:%d:%s", p.id, sha)
	c[key]++
	c["user"]++
	return (l.PerProjectCommitUser > 0 && c[key] > int64(l.PerProjectCommitUser)) ||
		(l.PerUser > 0 && c["user"] > int64(l.PerUser))
}

func writeTooManyPipelines(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string][]string{"base": {TooManyPipelines}}})
}
