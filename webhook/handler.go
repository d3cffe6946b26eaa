// Package webhook receives GitLab webhooks (project and group hooks): it
// checks the Standard Webhooks signature or the secret token in constant
// time, caps the body, decodes Pipeline Hook and Push Hook
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
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
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

// Signing modes: how the handler treats the webhook-signature header.
const (
	// SigningAuto verifies a signature when the delivery carries one (a
	// wrong one is refused) and checks X-Gitlab-Token when it does not.
	SigningAuto = "auto"
	// SigningRequired refuses deliveries without a valid signature.
	SigningRequired = "required"
	// SigningOff ignores signatures: X-Gitlab-Token only.
	SigningOff = "off"
)

// SigningModes are the accepted values of Options.Signing.
func SigningModes() []string { return []string{SigningAuto, SigningRequired, SigningOff} }

// Options configure a Handler.
type Options struct {
	// Secret is the X-Gitlab-Token an unsigned delivery must carry.
	// Required unless Signing is SigningRequired.
	Secret string
	// Signing is SigningAuto (default), SigningRequired or SigningOff.
	Signing string
	// SigningTokens verify webhook-signature: the current token first, then
	// the previous one while a rotation is rolled out. Required with
	// SigningRequired; without any, SigningAuto checks the secret only.
	SigningTokens []string
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
	verifier   *Verifier // nil: signatures are not checked
}

// NewHandler checks the options and returns the handler.
func NewHandler(opts Options) (*Handler, error) {
	if opts.Signing == "" {
		opts.Signing = SigningAuto
	}
	h := &Handler{}
	switch opts.Signing {
	case SigningAuto, SigningRequired:
		if len(opts.SigningTokens) > 0 {
			v, err := NewVerifier(opts.SigningTokens...)
			if err != nil {
				return nil, err
			}
			h.verifier = v
		}
	case SigningOff:
	default:
		return nil, fmt.Errorf("webhook: signing mode %q: want %s", opts.Signing, strings.Join(SigningModes(), ", "))
	}
	if opts.Signing == SigningRequired && h.verifier == nil {
		return nil, errors.New("webhook: signing is required but no signing token is set")
	}
	if opts.Secret == "" && opts.Signing != SigningRequired {
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
	h.opts, h.secretHash = opts, sha256.Sum256([]byte(opts.Secret))
	return h, nil
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
	// A signature covers the body, so it is checked after reading it; an
	// unsigned delivery is refused before.
	signed := h.verifier != nil && r.Header.Get(HeaderWebhookSignature) != ""
	if !signed {
		if why := h.unsignedRefusal(r); why != "" {
			h.refuse(w, r, kind, eventType, why)
			return
		}
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
	now := h.opts.Now()
	if signed {
		err := h.verifier.Verify(r.Header.Get(HeaderWebhookID), r.Header.Get(HeaderWebhookTimestamp),
			r.Header.Get(HeaderWebhookSignature), body, now)
		if err != nil {
			h.refuse(w, r, kind, eventType, err.Error())
			return
		}
	}
	ev, err := Decode(eventType, body, h.opts.DependencyFiles, now)
	var ignored *Ignored
	switch {
	case errors.As(err, &ignored):
		h.answer(w, kind, OutcomeIgnored, ignored.Reason)
		return
	case err != nil:
		h.opts.Logger.Warn("malformed webhook", "event", clip(eventType), "err", err)
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
		h.opts.Logger.Error("cannot record webhook event", "event", clip(eventType), "project", ev.project(), "err", err)
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

// unsignedRefusal says why a delivery without a signature that depsd can
// check is refused, or "" when its X-Gitlab-Token is right.
func (h *Handler) unsignedRefusal(r *http.Request) string {
	if h.opts.Signing == SigningRequired {
		return "unsigned delivery while webhook signing is required"
	}
	if !h.tokenOK(r.Header.Get("X-Gitlab-Token")) {
		return "wrong or missing X-Gitlab-Token"
	}
	return ""
}

// refuse answers 401. The log and the answer name the reason only: never
// a token, a key or a signature that was sent; the event header, which
// the unauthenticated sender chose, is clipped.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, kind, eventType, why string) {
	h.opts.Logger.Warn("webhook refused", "remote", r.RemoteAddr, "event", clip(eventType), "reason", why)
	h.opts.Observe(kind, OutcomeUnauthorized)
	http.Error(w, "unauthorized: "+why, http.StatusUnauthorized)
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
// delivery; a signed delivery's webhook-id is the same value (and covered
// by the signature, so a replay inside the timestamp window is a
// duplicate). Older GitLab versions send neither; the body's hash is then
// the key (a resend carries the same body).
func deliveryKey(r *http.Request, body []byte) string {
	if k := r.Header.Get(HeaderWebhookID); k != "" {
		return k
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// maxLogged is how much of a header value a log line or an answer
// repeats: the sender chooses it (up to the server's header limit, 1 MB).
const maxLogged = 64

// clip bounds a sender's header value for a log line or an answer,
// saying how long it was.
func clip(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	cut := maxLogged
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
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
