package gitlabtest

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// hookEvents are the event switches of a project hook, by JSON name.
var hookEvents = []string{
	"push_events", "issues_events", "confidential_issues_events",
	"merge_requests_events", "tag_push_events", "note_events",
	"confidential_note_events", "job_events", "pipeline_events",
	"wiki_page_events", "deployment_events", "releases_events",
	"milestone_events", "feature_flag_events", "emoji_events",
	"resource_access_token_events", "resource_deploy_token_events",
	"vulnerability_events",
}

type hook struct {
	id            int64
	url           string
	name          string
	description   string
	token         string
	signingToken  string // whsec_...; "" when none
	events        map[string]bool
	branchFilter  string
	enableSSL     bool
	alertStatus   string // executable, temporarily_disabled, disabled
	disabledUntil time.Time
	createdAt     time.Time
	// Auto-disabling after failed deliveries, as GitLab counts them.
	recentFailures int
	backoffCount   int
}

// Hook is a project hook as the fake stores it, token included.
type Hook struct {
	ID    int64
	URL   string
	Token string
	// SigningToken is the Standard Webhooks signing token (whsec_...),
	// empty when none was set or GitLab ignored it.
	SigningToken           string
	Events                 []string // enabled events, e.g. "pipeline_events", sorted
	PushEventsBranchFilter string
	EnableSSLVerification  bool
	AlertStatus            string
	DisabledUntil          time.Time
}

func (h *hook) export() Hook {
	var ev []string
	for _, e := range hookEvents {
		if h.events[e] {
			ev = append(ev, e)
		}
	}
	slices.Sort(ev)
	return Hook{
		ID: h.id, URL: h.url, Token: h.token, SigningToken: h.signingToken, Events: ev,
		PushEventsBranchFilter: h.branchFilter, EnableSSLVerification: h.enableSSL,
		AlertStatus: h.alertStatus, DisabledUntil: h.disabledUntil,
	}
}

// Hooks returns the hooks of a project ordered by id, tokens included.
func (s *Server) Hooks(projectPath string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	out := make([]Hook, 0, len(p.hooks))
	for _, h := range p.hooks {
		out = append(out, h.export())
	}
	return out
}

// AddHook installs a hook directly (as if someone made it in the UI) and
// returns its id. Events lists the enabled events by JSON name.
func (s *Server) AddHook(projectPath string, h Hook) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return 0, fmt.Errorf("add hook to %s: project not found", projectPath)
	}
	nh := &hook{
		id: s.inst.id(), url: h.URL, token: h.Token, signingToken: h.SigningToken, events: map[string]bool{},
		branchFilter: h.PushEventsBranchFilter, enableSSL: h.EnableSSLVerification,
		alertStatus: cmp.Or(h.AlertStatus, "executable"), disabledUntil: h.DisabledUntil,
		createdAt: s.now(),
	}
	for _, e := range h.Events {
		if !slices.Contains(hookEvents, e) {
			return 0, fmt.Errorf("add hook to %s: unknown event %q", projectPath, e)
		}
		nh.events[e] = true
	}
	p.hooks = append(p.hooks, nh)
	return nh.id, nil
}

// DisableHook disables a hook the way GitLab does after failed deliveries:
// temporarily (until the given time) or, with a zero until, permanently.
func (s *Server) DisableHook(projectPath string, hookID int64, until time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("disable hook of %s: project not found", projectPath)
	}
	for _, h := range p.hooks {
		if h.id == hookID {
			h.disabledUntil = until
			h.alertStatus = "disabled"
			if !until.IsZero() {
				h.alertStatus = "temporarily_disabled"
			}
			return nil
		}
	}
	return fmt.Errorf("disable hook %d of %s: not found", hookID, projectPath)
}

// WebhookSigning is which GitLab the fake plays for signed webhooks.
type WebhookSigning int

// The WebhookSigning values.
const (
	// SigningSupported: GitLab 19.0 and later. Hooks take signing_token
	// (whsec_ + base64 of 32 bytes), never return it, answer
	// token_present and signing_token_present, and deliveries of a hook
	// with a signing token carry webhook-id, webhook-timestamp and
	// webhook-signature. The default.
	SigningSupported WebhookSigning = iota
	// SigningFlagOff: GitLab 19.x with the webhook_signing_token feature
	// flag disabled: signing_token is accepted and silently ignored, and
	// signing_token_present is false.
	SigningFlagOff
	// SigningUnsupported: GitLab before 19.0: signing_token is an unknown
	// parameter, silently ignored, and hooks report neither token_present
	// nor signing_token_present.
	SigningUnsupported
)

// SetWebhookSigning makes the fake a GitLab with or without signed
// webhooks (see WebhookSigning). It applies to later API calls and
// deliveries; signing tokens already stored stay.
func (s *Server) SetWebhookSigning(v WebhookSigning) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signing = v
}

// hookBody renders a hook; the tokens themselves are write-only and never
// returned, only token_present and signing_token_present (GitLab 19.0+).
func (s *Server) hookBody(projectID int64, h *hook, now time.Time) map[string]any {
	status := h.alertStatus
	if status == "temporarily_disabled" && !h.disabledUntil.After(now) {
		status = "executable" // GitLab computes the status: the pause is over
	}
	out := map[string]any{
		"id": h.id, "url": h.url, "name": h.name, "description": h.description,
		"project_id": projectID, "push_events_branch_filter": h.branchFilter,
		"branch_filter_strategy": "wildcard", "enable_ssl_verification": h.enableSSL,
		"alert_status": status, "disabled_until": timePtr(h.disabledUntil),
		"url_variables": []any{}, "created_at": gitlabTime(h.createdAt),
		"custom_webhook_template": "", "custom_headers": []any{},
		"token_present": h.token != "", "signing_token_present": h.signingToken != "",
	}
	if s.signing == SigningUnsupported {
		delete(out, "token_present")
		delete(out, "signing_token_present")
	}
	for _, e := range hookEvents {
		out[e] = h.events[e]
	}
	return out
}

// requestProject finds the project named by the request's :id, or answers
// 404 as GitLab does. The caller holds s.mu.
func (s *Server) requestProject(w http.ResponseWriter, r *http.Request) (*project, bool) {
	p, ok := s.inst.findProject(r.PathValue("id"))
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
	}
	return p, ok
}

func (s *Server) findHook(w http.ResponseWriter, r *http.Request) (*project, int, bool) {
	p, ok := s.requestProject(w, r)
	if !ok {
		return nil, 0, false
	}
	id, err := strconv.ParseInt(r.PathValue("hook_id"), 10, 64)
	if err == nil {
		for i, h := range p.hooks {
			if h.id == id {
				return p, i, true
			}
		}
	}
	writeMessage(w, http.StatusNotFound, "404 Not found")
	return nil, 0, false
}

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	page := paginate(s, w, r, p.hooks)
	out := make([]map[string]any, 0, len(page))
	for _, h := range page {
		out = append(out, s.hookBody(p.id, h, s.now()))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getHook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, i, ok := s.findHook(w, r); ok {
		writeJSON(w, http.StatusOK, s.hookBody(p.id, p.hooks[i], s.now()))
	}
}

// hookParamError is GitLab's answer to an attribute it refuses.
type hookParamError struct {
	status int
	body   any
}

func (e *hookParamError) write(w http.ResponseWriter) { writeJSON(w, e.status, e.body) }

// applyHookParams sets the attributes present in prm, or says why GitLab
// refuses them.
func (s *Server) applyHookParams(h *hook, prm params) *hookParamError {
	if u, ok := prm.str("url"); ok {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return &hookParamError{http.StatusUnprocessableEntity, map[string]any{"message": map[string][]string{"url": {"is blocked: url is invalid"}}}}
		}
		h.url = u
	}
	if v, ok := prm.str("signing_token"); ok && s.signing == SigningSupported {
		// GitLab's model validation; the message's exact wording is the
		// fake's (GitLab documents the rule, not the text).
		if v != "" && !validSigningToken(v) {
			return &hookParamError{http.StatusBadRequest, map[string]any{"message": map[string][]string{"signing_token": {"must be in whsec_<base64> format encoding a 32-byte key"}}}}
		}
		h.signingToken = v
	}
	if v, ok := prm.str("name"); ok {
		h.name = v
	}
	if v, ok := prm.str("description"); ok {
		h.description = v
	}
	if v, ok := prm.str("token"); ok {
		h.token = v
	}
	if v, ok := prm.str("push_events_branch_filter"); ok {
		h.branchFilter = v
	}
	if v, ok := prm.boolean("enable_ssl_verification"); ok {
		h.enableSSL = v
	}
	for _, e := range hookEvents {
		if v, ok := prm.boolean(e); ok {
			h.events[e] = v
		}
	}
	return nil
}

// validSigningToken is GitLab's rule: whsec_ + standard base64 of 32 bytes.
func validSigningToken(t string) bool {
	rest, ok := strings.CutPrefix(t, "whsec_")
	if !ok {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	return err == nil && len(key) == 32
}

// newHook makes a hook, project or group, from the parameters of a
// create request with GitLab's defaults (push events on, SSL verification
// on), or answers the request's error. Callers hold s.mu.
func (s *Server) newHook(w http.ResponseWriter, prm params) (*hook, bool) {
	if u, _ := prm.str("url"); u == "" {
		badRequest(w, "url is missing")
		return nil, false
	}
	h := &hook{
		id: s.inst.id(), events: map[string]bool{"push_events": true}, enableSSL: true,
		alertStatus: "executable", createdAt: s.now(),
	}
	if perr := s.applyHookParams(h, prm); perr != nil {
		perr.write(w)
		return nil, false
	}
	return h, true
}

func (s *Server) addHook(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	h, ok := s.newHook(w, prm)
	if !ok {
		return
	}
	p.hooks = append(p.hooks, h)
	writeJSON(w, http.StatusCreated, s.hookBody(p.id, h, s.now()))
}

// editHook updates the given attributes. As in GitLab, saving a hook does
// not touch its disabled state (alert_status, disabled_until, failure
// counts): only a successful delivery, e.g. a test request, re-enables it.
func (s *Server) editHook(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, i, ok := s.findHook(w, r)
	if !ok {
		return
	}
	if s.updateHook(w, p.hooks[i], prm) {
		writeJSON(w, http.StatusOK, s.hookBody(p.id, p.hooks[i], s.now()))
	}
}

// updateHook applies an edit request's parameters to h, all of them or,
// when one is invalid, none (its error is answered). Callers hold s.mu.
func (s *Server) updateHook(w http.ResponseWriter, h *hook, prm params) bool {
	edited := *h
	edited.events = maps.Clone(h.events)
	if perr := s.applyHookParams(&edited, prm); perr != nil {
		perr.write(w)
		return false
	}
	*h = edited
	return true
}

func (s *Server) deleteHook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, i, ok := s.findHook(w, r)
	if !ok {
		return
	}
	p.hooks = slices.Delete(p.hooks, i, i+1)
	w.WriteHeader(http.StatusNoContent)
}
