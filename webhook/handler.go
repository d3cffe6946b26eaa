// Package webhook receives GitLab project webhooks: it checks the secret
// token in constant time, caps the body, decodes Pipeline Hook and Push Hook
// events, drops what depsd does not act on, records the rest durably and
// acknowledges at once. It never calls GitLab: the recorded events are
// processed after the answer, so GitLab (which waits 10 s and disables
// failing hooks) always gets a fast 2xx.
package webhook

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Recorder stores an accepted event before the handler answers, so an
// event survives a crash right after the 2xx. It is called concurrently.
// duplicate is true when an event with the same Key was recorded before:
// GitLab's resends carry the same Idempotency-Key.
type Recorder interface {
	Record(ctx context.Context, ev Event) (duplicate bool, err error)
}

// Scope says whether depsd manages a project (by GitLab id); events of
// other projects are ignored. It is called concurrently.
type Scope interface {
	InScope(projectID int64) bool
}

// Outcomes of a delivery, as counted by Options.Observe.
const (
	OutcomeAccepted     = "accepted"
	OutcomeDuplicate    = "duplicate"
	OutcomeIgnored      = "ignored"
	OutcomeUnauthorized = "unauthorized"
	OutcomeMalformed    = "malformed"
	OutcomeTooLarge     = "too_large"
	OutcomeError        = "error"
)

// Options configure a Handler.
type Options struct {
	// Secret is the X-Gitlab-Token every delivery must carry. Required.
	Secret string
	// MaxBody caps the request body. Default 4 MiB (pipeline events of big
	// pipelines list every job).
	MaxBody int64
	// DependencyFiles are the file names whose change on the default
	// branch calls for a rescan of the project.
	DependencyFiles []string
	Recorder        Recorder
	Scope           Scope
	// Observe counts deliveries by event type and outcome (metrics).
	Observe func(eventType, outcome string)
	Now     func() time.Time
	Logger  *slog.Logger
}

// Handler is the http.Handler of POST /hooks/gitlab.
type Handler struct {
	opts       Options
	secretHash [sha256.Size]byte
}

// NewHandler checks the options and returns the handler.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Secret == "" {
		return nil, errors.New("webhook: a secret token is required")
	}
	if opts.Recorder == nil {
		return nil, errors.New("webhook: a recorder is required")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 4 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observe == nil {
		opts.Observe = func(string, string) {}
	}
	return &Handler{opts: opts, secretHash: sha256.Sum256([]byte(opts.Secret))}, nil
}

// ServeHTTP follows verify → cap → decode → record → ack.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	eventType := r.Header.Get("X-Gitlab-Event")
	kind := metricKind(eventType)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if !h.tokenOK(r.Header.Get("X-Gitlab-Token")) {
		// Never log or echo what was sent.
		h.opts.Logger.Warn("webhook with a wrong or missing token", "remote", r.RemoteAddr, "event", eventType)
		h.opts.Observe(kind, OutcomeUnauthorized)
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.opts.Observe(kind, OutcomeTooLarge)
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		h.opts.Observe(kind, OutcomeMalformed)
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	ev, err := Decode(eventType, body, h.opts.DependencyFiles, h.opts.Now())
	var ignored *Ignored
	switch {
	case errors.As(err, &ignored):
		h.answer(w, kind, OutcomeIgnored, ignored.Reason)
		return
	case err != nil:
		h.opts.Logger.Warn("malformed webhook", "event", eventType, "err", err)
		h.opts.Observe(kind, OutcomeMalformed)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if projectID := ev.projectID(); h.opts.Scope != nil && !h.opts.Scope.InScope(projectID) {
		h.answer(w, kind, OutcomeIgnored, "project outside depsd's scope")
		return
	}
	ev.Key = deliveryKey(r, body)
	dup, err := h.opts.Recorder.Record(r.Context(), ev)
	if err != nil {
		// GitLab does not resend by itself; the reconciler catches up on
		// pipelines depsd created, and the operator sees this error.
		h.opts.Logger.Error("cannot record webhook event", "event", eventType, "project", ev.project(), "err", err)
		h.opts.Observe(kind, OutcomeError)
		http.Error(w, "cannot record the event", http.StatusServiceUnavailable)
		return
	}
	if dup {
		h.answer(w, kind, OutcomeDuplicate, "already received")
		return
	}
	h.answer(w, kind, OutcomeAccepted, "")
}

// tokenOK compares hashes so neither the content nor the length of the
// secret leaks through timing.
func (h *Handler) tokenOK(token string) bool {
	if token == "" {
		return false
	}
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], h.secretHash[:]) == 1
}

func (h *Handler) answer(w http.ResponseWriter, kind, outcome, reason string) {
	h.opts.Observe(kind, outcome)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Status string `json:"status"`
		Reason string `json:"reason,omitempty"`
	}{outcome, reason})
}

// deliveryKey is GitLab's Idempotency-Key, the same on every resend of a
// delivery. Older GitLab versions do not send it; the body's hash is then
// the key (a resend carries the same body).
func deliveryKey(r *http.Request, body []byte) string {
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// metricKind bounds the label values of the events metric.
func metricKind(eventType string) string {
	switch eventType {
	case "Pipeline Hook":
		return "pipeline"
	case "Push Hook":
		return "push"
	}
	return "other"
}

func (e Event) projectID() int64 {
	if e.Pipeline != nil {
		return e.Pipeline.ProjectID
	}
	return e.Push.ProjectID
}

func (e Event) project() string {
	if e.Pipeline != nil {
		return e.Pipeline.Project
	}
	return e.Push.Project
}
