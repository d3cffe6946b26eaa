package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNotFound: the project, group, file, branch, pipeline or hook does
	// not exist (404). A missing dependency file is normal and reported so.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the token was rejected (401) or lacks the needed
	// scope (403 insufficient_scope). Retrying does not help; fix the token.
	ErrUnauthorized = errors.New("token rejected by GitLab")
	// ErrForbidden: the token is valid but may not do this (403), e.g. the
	// user is not a Developer of the project or the project is archived.
	ErrForbidden = errors.New("forbidden")
	// ErrVariablesRefused: the project refuses pipeline variables from the
	// token's user (400 "Insufficient permissions to set pipeline
	// variables": ci_pipeline_variables_minimum_override_role,
	// restrict_user_defined_variables). The same create without variables
	// may succeed: neither retryable nor permanent.
	ErrVariablesRefused = errors.New("pipeline variables refused by the project")
	// ErrInputsRefused: the project's CI configuration does not declare
	// the inputs given (400 "unknown input arguments: ...", or "Given
	// inputs not defined in the `spec` section ..."). The same create
	// without inputs may succeed: neither retryable nor permanent.
	ErrInputsRefused = errors.New("pipeline inputs refused by the project's CI configuration")
	// ErrConflict: the repository or the merge request is not what the
	// request assumed: 409 (another open merge request of the same
	// branches, a merge's sha that is no longer the source branch's
	// head), or 400 for a tag, branch or file that already exists and a
	// file changed since the commit the request named. Re-read, then
	// decide.
	ErrConflict = errors.New("conflicts with the repository's current state")
	// ErrNotMergeable: a merge request cannot be merged now: 405 (not
	// open, a draft, a check failing, no pipeline to wait for) or 422
	// ("Branch cannot be merged": a conflict).
	ErrNotMergeable = errors.New("merge request cannot be merged")
	// ErrStatusTransition: a commit status cannot move to the state asked
	// from the state it is in (400 "Cannot transition status via :run from
	// :running"): GitLab's state machine refused it and the status is
	// unchanged. Permanent.
	ErrStatusTransition = errors.New("commit status transition refused")
)

// APIError is a failed GitLab API call. Its text names the request and the
// status; it never holds the token (see redact).
type APIError struct {
	Method   string // GET, POST, ...
	Path     string // escaped request path, e.g. /api/v4/projects/12/pipeline
	Status   int    // HTTP status; 0 for a network error
	Message  string // GitLab's message, or the network error, redacted
	Attempts int    // requests sent, retries included
	// retryable is whether a later attempt may succeed (429, 5xx, network
	// errors, the pipeline-creation throttle).
	retryable bool
	kind      error // ErrNotFound, ErrUnauthorized, ErrForbidden, ErrVariablesRefused, ErrInputsRefused, ErrStatusTransition, ErrConflict, ErrNotMergeable or nil
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", e.Method, e.Path)
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d %s", e.Status, http.StatusText(e.Status))
	} else {
		b.WriteString("network error")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if e.kind == ErrUnauthorized {
		b.WriteString(" (check the API token and its api scope)")
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrNotFound, ErrUnauthorized, ErrForbidden,
// ErrVariablesRefused, ErrInputsRefused, ErrStatusTransition, ErrConflict and
// ErrNotMergeable.
func (e *APIError) Unwrap() error { return e.kind }

// IsRetryable reports whether err is worth retrying later: rate limits
// (429, and GitLab's pipeline-creation throttle which answers 400), server
// errors, network errors, and the 409 of a commit status another request
// is updating. Context cancellation is not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.retryable
	}
	return false
}

// IsPermanent reports whether err is a GitLab answer that will not change by
// retrying: 4xx other than 429 (bad request, token rejected, forbidden, not
// found, ...). A refusal of a create's variables or inputs
// (ErrVariablesRefused, ErrInputsRefused) is not: the create goes through
// without them.
func IsPermanent(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && !ae.retryable && ae.Status >= 400 && ae.Status < 500 &&
		ae.kind != ErrVariablesRefused && ae.kind != ErrInputsRefused
}

// classify fills the kind and retryable fields from the status and message.
// throttle reports an answer saying GitLab's rate limit is exhausted: a
// 429, or the 400 of its pipeline-creation limit.
func (e *APIError) throttle() bool {
	return e.Status == http.StatusTooManyRequests ||
		(e.Status == http.StatusBadRequest && strings.Contains(e.Message, "Too many pipelines"))
}

func (e *APIError) classify() {
	switch {
	case e.Status == 0:
		e.retryable = true
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		e.retryable = true
	case e.Status == http.StatusNotFound:
		e.kind = ErrNotFound
	case e.Status == http.StatusUnauthorized && e.Method == http.MethodPut && strings.HasSuffix(e.Path, "/merge"):
		// GitLab answers 401 to a merge the token's user may not make
		// (no right to merge into the target branch): the token is fine.
		e.kind = ErrForbidden
	case e.Status == http.StatusUnauthorized:
		e.kind = ErrUnauthorized
	case e.Status == http.StatusConflict && strings.Contains(e.Message, "Another update to this commit status is in progress"):
		e.retryable = true
	case e.Status == http.StatusBadRequest && strings.Contains(e.Message, "Cannot transition status via"):
		e.kind = ErrStatusTransition
	case e.Status == http.StatusForbidden:
		e.kind = ErrForbidden
		if strings.Contains(e.Message, "insufficient_scope") || strings.Contains(e.Message, "invalid_token") {
			e.kind = ErrUnauthorized
		}
	case e.Status == http.StatusBadRequest && strings.Contains(e.Message, "Insufficient permissions to set pipeline variables"):
		e.kind = ErrVariablesRefused
	case e.Status == http.StatusBadRequest && (strings.Contains(e.Message, "unknown input arguments") ||
		strings.Contains(e.Message, "Given inputs not defined in the `spec` section")):
		e.kind = ErrInputsRefused
	case e.Status == http.StatusConflict,
		e.Status == http.StatusBadRequest && (strings.Contains(e.Message, "already exists") ||
			strings.Contains(e.Message, "has changed since you started editing")):
		e.kind = ErrConflict
	case e.Status == http.StatusMethodNotAllowed,
		e.Status == http.StatusUnprocessableEntity && strings.Contains(e.Message, "cannot be merged"):
		e.kind = ErrNotMergeable
	case e.throttle():
		// GitLab's pipeline-creation rate limit answers 400, not 429.
		e.retryable = true
	}
}
