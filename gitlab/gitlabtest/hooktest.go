package gitlabtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

// testHook is POST /projects/:id/hooks/:hook_id/test/:trigger ("Trigger a
// test project webhook"). GitLab runs the test synchronously, whether or
// not the hook is disabled: for push_events it sends a Push Hook built from
// the project's latest commit and answers 201 {"message":"201 Created"}
// when the hook answered 2xx, 422 with the failure otherwise. A successful
// test delivery re-enables a disabled hook (hookResult). GitLab requires the
// Maintainer role; the fake only checks the token. Only push_events is
// implemented; GitLab's per-user rate limit (5/min) is not.
func (s *Server) testHook(w http.ResponseWriter, r *http.Request) {
	trigger := r.PathValue("trigger")
	if !slices.Contains(hookEvents, trigger) {
		badRequest(w, "trigger does not have a valid value")
		return
	}
	if trigger != "push_events" {
		badRequest(w, "gitlabtest: only the push_events test is implemented")
		return
	}
	s.mu.Lock()
	p, i, ok := s.findHook(w, r)
	if !ok {
		s.mu.Unlock()
		return
	}
	h := p.hooks[i]
	c, ok := p.resolve(p.defaultBranch)
	if p.emptyRepo || !ok {
		s.mu.Unlock()
		writeMessage(w, http.StatusUnprocessableEntity, "Ensure the project has at least one commit.")
		return
	}
	var before map[string]string
	if parent, ok := p.commits[c.parent]; ok {
		before = parent.files
	}
	body, err := json.Marshal(s.pushEvent(p, p.defaultBranch, c, diffFiles(before, c.files)))
	if err != nil {
		s.mu.Unlock()
		panic("gitlabtest: render push event: " + err.Error())
	}
	d := &Delivery{
		ProjectID: p.id, HookID: h.id, Event: PushHook, URL: h.url,
		IdempotencyKey: newUUID(), EventUUID: newUUID(), Ref: "refs/heads/" + p.defaultBranch,
		Payload: body, QueuedAt: s.now(),
	}
	s.enqueue(d) // never lost: LoseWebhooks faults do not apply to tests
	s.mu.Unlock()
	s.answerTest(w, r, d)
}

// answerTest waits for a test delivery and answers as GitLab does: 201
// when the hook answered 2xx, 422 with the failure otherwise.
func (s *Server) answerTest(w http.ResponseWriter, r *http.Request, d *Delivery) {
	done := func() bool { return d.State != DeliveryQueued && d.State != DeliverySending }
	if err := s.waitFor(r.Context(), done); err != nil {
		return // client went away
	}
	s.mu.Lock()
	state, code, derr := d.State, d.StatusCode, d.Err
	s.mu.Unlock()
	switch {
	case state == DeliveryDelivered:
		writeMessage(w, http.StatusCreated, "201 Created")
	case derr != "":
		writeMessage(w, http.StatusUnprocessableEntity, derr)
	default:
		writeMessage(w, http.StatusUnprocessableEntity, fmt.Sprintf("Hook executed but returned HTTP %d", code))
	}
}
