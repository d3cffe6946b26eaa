// Package webhook receives GitLab webhooks (project and group hooks): it
// checks the Standard Webhooks signature or the secret token in constant
// time, caps the body, decodes Pipeline Hook and Push Hook
// events, drops what depsd does not act on, records the rest durably and
// acknowledges at once. It never calls GitLab: the recorded events are
// processed after the answer, so GitLab (which waits 10 s and disables
// failing hooks) always gets a fast 2xx.
//
// What it holds: the webhook receiver: verify (a
// Standard Webhooks signature — HMAC-SHA256 over `id.timestamp.body`, the
// current and previous signing tokens, a 5-minute window — or `X-Gitlab-
// Token`, per `hooks.signing`: the secret of the project the body names,
// or of a hooked group holding it, derived from the configured one
// (`webhook/secrets.go`), which is itself accepted only while hooks may
// still carry it; the pure `Verifier` is fuzzed), cap, decode, record,
// acknowledge
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
	// Secret is the configured webhook secret (hooks.secret): an unsigned
	// delivery's X-Gitlab-Token must be the secret derived from it for
	// the project the delivery names, or for a group of Groups the project
	// is in (secrets.go); or, with SecretShared or while
	// SharedSecretAccepted says so, Secret itself. Required unless
	// Signing is SigningRequired.
	Secret string
	// SecretMode is SecretPerProject (default) or SecretShared.
	SecretMode string
	// SharedSecretAccepted says, with SecretPerProject, whether Secret
	// itself still authenticates a delivery of any project: while hooks
	// installed before per-project secrets may carry it. Called for each
	// unsigned delivery, concurrently. Nil: never.
	SharedSecretAccepted func() bool
	// Groups are the groups whose depsd group hook carries GroupSecret
	// (hooks.mode: group): that secret is accepted for the projects below
	// the group.
	Groups []string
	// ProjectPath gives the path of an in-scope project by id, as depsd
	// scanned it (a delivery's own path_with_namespace is not trusted);
	// false for a project out of scope. Required with Groups; called
	// concurrently.
	ProjectPath func(projectID int64) (string, bool)
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
	// Follows says which refs besides a project's default branch depsd
	// follows (refs:); nil: none.
	Follows Follows
	// Premerge says which projects' merge request pipelines (and branch
	// successes) are candidates to validate (premerge:); nil: none.
	Premerge Covers
	Recorder Recorder
	Scope    Scope
	// Observe counts deliveries by event type and outcome (metrics).
	Observe func(eventType, outcome string)
	Now     func() time.Time
	Logger  *slog.Logger
}

// Handler is the http.Handler of POST /hooks/gitlab.
type Handler struct {
	opts       Options
	secretHash [sha256.Size]byte
	// groupHashes are the hashes of the GroupSecret of each of
	// opts.Groups, in order.
	groupHashes [][sha256.Size]byte
	verifier    *Verifier // nil: signatures are not checked
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
	switch opts.SecretMode {
	case "":
		opts.SecretMode = SecretPerProject
	case SecretPerProject, SecretShared:
	default:
		return nil, fmt.Errorf("webhook: secret mode %q: want %s", opts.SecretMode, strings.Join(SecretModes(), " or "))
	}
	if len(opts.Groups) > 0 && opts.ProjectPath == nil {
		return nil, errors.New("webhook: group hooks need the projects' paths")
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
	for _, g := range opts.Groups {
		h.groupHashes = append(h.groupHashes, sha256.Sum256([]byte(GroupSecret(opts.Secret, g))))
	}
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
	// bound is the project whose secret authenticated the delivery; 0
	// when it may name any (a signature, the shared secret).
	var bound int64
	if signed {
		err := h.verifier.Verify(r.Header.Get(HeaderWebhookID), r.Header.Get(HeaderWebhookTimestamp),
			r.Header.Get(HeaderWebhookSignature), body, now)
		if err != nil {
			h.refuse(w, r, kind, eventType, err.Error())
			return
		}
	} else if !h.sharedOK(r.Header.Get("X-Gitlab-Token")) {
		id, named := deliveredProject(body)
		switch h.projectTokenOK(r.Header.Get("X-Gitlab-Token"), id, named) {
		case tokenWrong:
			h.refuse(w, r, kind, eventType, "wrong or missing X-Gitlab-Token")
			return
		case tokenGroupOutOfScope:
			h.answer(w, kind, OutcomeIgnored, "project outside depsd's scope")
			return
		}
		bound = id
	}
	ev, err := Decode(eventType, body, h.opts.DependencyFiles, h.opts.Follows, h.opts.Premerge, now)
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
	if bound != 0 && ev.projectID() != bound {
		// Read twice, the body named two projects: authenticated for
		// one, it must not be recorded for the other.
		h.refuse(w, r, kind, eventType, "the event names another project than the one its secret is for")
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
// check is refused before its body is read, or "": its X-Gitlab-Token is
// the shared secret, or may be a project's or a group's (projectTokenOK
// decides once the body says which project).
func (h *Handler) unsignedRefusal(r *http.Request) string {
	if h.opts.Signing == SigningRequired {
		return "unsigned delivery while webhook signing is required"
	}
	if r.Header.Get("X-Gitlab-Token") == "" {
		return "wrong or missing X-Gitlab-Token"
	}
	return ""
}

// sharedOK reports whether token is the configured secret itself and
// that is accepted for every project: hooks.secret_mode: shared, or hooks
// that may still carry it.
func (h *Handler) sharedOK(token string) bool {
	if h.opts.SecretMode != SecretShared && (h.opts.SharedSecretAccepted == nil || !h.opts.SharedSecretAccepted()) {
		return false
	}
	return h.tokenOK(token)
}

// What projectTokenOK found.
type tokenVerdict int

const (
	tokenWrong tokenVerdict = iota
	// tokenProject: the secret of the project's hook, or of a group hook
	// of a group the project is in.
	tokenProject
	// tokenGroupOutOfScope: a group hook's secret, for a project depsd
	// does not manage (so cannot tell whether it is in the group): the
	// delivery is ignored, as any out of scope.
	tokenGroupOutOfScope
)

// projectTokenOK checks token against the secrets that authenticate a
// delivery naming project id: the project's own, and those of the hooked
// groups the project (as depsd scanned it) is in. Each comparison is of
// hashes, in constant time.
func (h *Handler) projectTokenOK(token string, id int64, named bool) tokenVerdict {
	if !named {
		return tokenWrong
	}
	got := sha256.Sum256([]byte(token))
	own := sha256.Sum256([]byte(ProjectSecret(h.opts.Secret, id)))
	verdict := tokenWrong
	if subtle.ConstantTimeCompare(got[:], own[:]) == 1 {
		verdict = tokenProject
	}
	if len(h.groupHashes) == 0 {
		return verdict
	}
	path, inScope := h.opts.ProjectPath(id)
	for i, g := range h.opts.Groups {
		if subtle.ConstantTimeCompare(got[:], h.groupHashes[i][:]) != 1 {
			continue
		}
		switch {
		case !inScope && verdict == tokenWrong:
			verdict = tokenGroupOutOfScope
		case inScope && underGroup(path, g):
			verdict = tokenProject
		}
	}
	return verdict
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
