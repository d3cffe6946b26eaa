package gitlabtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Webhook event names, as sent in X-Gitlab-Event.
const (
	PipelineHook = "Pipeline Hook"
	PushHook     = "Push Hook"
)

// DeliveryState is where a webhook delivery is.
type DeliveryState string

// Delivery states.
const (
	DeliveryQueued    DeliveryState = "queued"    // waiting behind earlier deliveries of its hook
	DeliverySending   DeliveryState = "sending"   // request in flight
	DeliveryDelivered DeliveryState = "delivered" // answered 2xx
	DeliveryFailed    DeliveryState = "failed"    // answered non-2xx, or the request failed or timed out
	DeliveryLost      DeliveryState = "lost"      // dropped on purpose (LoseWebhooks): never sent
	DeliveryDropped   DeliveryState = "dropped"   // never sent: the hook was deleted or the server closed
)

// Delivery is one webhook request, as GitLab logs it in a hook's "recent
// events".
type Delivery struct {
	ID        int64
	ProjectID int64
	// GroupID is the group of a group hook's delivery; 0 for a project
	// hook's.
	GroupID int64
	HookID  int64
	// Event is the X-Gitlab-Event header, e.g. "Pipeline Hook".
	Event string
	// URL the request was (or will be) sent to.
	URL string
	// IdempotencyKey is unique per delivery and kept by Resend.
	IdempotencyKey string
	// WebhookUUID (X-Gitlab-Webhook-UUID) is unique per request.
	WebhookUUID string
	// EventUUID (X-Gitlab-Event-UUID) is shared by the deliveries of one
	// triggering event to all hooks of the project.
	EventUUID string
	// PipelineID and PipelineStatus describe a Pipeline Hook event.
	PipelineID     int64
	PipelineStatus string
	// Ref is the pipeline's ref or the pushed ref (refs/heads/...).
	Ref string
	// Payload is the JSON body.
	Payload []byte
	State   DeliveryState
	// StatusCode is the receiver's HTTP status; 0 when there was none.
	StatusCode int
	// Err says why a request failed without a status, or why it was dropped.
	Err string
	// ResendOf is the id of the delivery this one resends, or 0.
	ResendOf int64
	QueuedAt time.Time
	SentAt   time.Time
	Elapsed  time.Duration
}

// permanentFailures is when GitLab disables a hook for good.
const permanentFailures = 40

// maxBackoff caps the temporary disabling of a failing hook.
const maxBackoff = 24 * time.Hour

// hookState is the webhook side of the server. Guarded by Server.mu.
type hookState struct {
	deliveries  []*Delivery          // Delivery.ID is index+1
	queues      map[int64]*hookQueue // by hook id
	busy        int                  // deliveries queued or in flight
	loseAll     int                  // deliveries of any project still to lose
	loseProject map[int64]int        // per project id
}

// hookQueue orders the deliveries of one hook: one goroutine sends them
// one after the other while the queue is not empty.
type hookQueue struct {
	items   []*Delivery
	running bool
}

func (hs *hookState) init() {
	hs.queues = map[int64]*hookQueue{}
	hs.loseProject = map[int64]int{}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// executable says whether GitLab would run the hook now.
func (h *hook) executable(now time.Time) bool {
	switch h.alertStatus {
	case "disabled":
		return false
	case "temporarily_disabled":
		return !h.disabledUntil.After(now)
	}
	return true
}

// fire queues a delivery of payload to every executable hook of p that
// subscribes to the event (scope is the hook's JSON switch, e.g.
// "pipeline_events"); accept filters hooks further. Callers hold s.mu.
//
// The project's group hooks (those of its group and every ancestor, when
// the instance is Premium) get the event too, each its own delivery with
// its own Idempotency-Key, as GitLab runs each hook on its own: a project
// with a project hook and a group hook to the same URL gets two deliveries
// of one event, with different keys.
func (s *Server) fire(p *project, event, scope string, accept func(*hook) bool, payload []byte, meta Delivery) {
	now := s.now()
	eventUUID := newUUID()
	type target struct {
		h       *hook
		groupID int64
	}
	var targets []target
	for _, h := range p.hooks {
		targets = append(targets, target{h, 0})
	}
	if s.premium {
		for _, g := range s.inst.ancestors(p) {
			for _, h := range g.hooks {
				targets = append(targets, target{h, g.id})
			}
		}
	}
	for _, t := range targets {
		h := t.h
		if !h.events[scope] || !h.executable(now) || (accept != nil && !accept(h)) {
			continue
		}
		d := meta
		d.ProjectID, d.GroupID, d.HookID, d.Event, d.URL = p.id, t.groupID, h.id, event, h.url
		d.IdempotencyKey, d.EventUUID = newUUID(), eventUUID
		d.Payload = payload
		d.QueuedAt = now
		if s.takeLoss(p.id) {
			d.State = DeliveryLost
			s.record(&d)
			continue
		}
		s.enqueue(&d)
	}
}

func (s *Server) takeLoss(projectID int64) bool {
	hs := &s.hooksOut
	if hs.loseProject[projectID] > 0 {
		hs.loseProject[projectID]--
		return true
	}
	if hs.loseAll > 0 {
		hs.loseAll--
		return true
	}
	return false
}

// record adds d to the log and gives it its id. Callers hold s.mu.
func (s *Server) record(d *Delivery) {
	s.hooksOut.deliveries = append(s.hooksOut.deliveries, d)
	d.ID = int64(len(s.hooksOut.deliveries))
	s.notify()
}

// enqueue records d and queues it behind the earlier deliveries of its
// hook, starting the hook's sender when it is idle. Callers hold s.mu.
func (s *Server) enqueue(d *Delivery) {
	s.record(d)
	if s.closed {
		d.State, d.Err = DeliveryDropped, "server closed"
		return
	}
	d.State = DeliveryQueued
	q, ok := s.hooksOut.queues[d.HookID]
	if !ok {
		q = &hookQueue{}
		s.hooksOut.queues[d.HookID] = q
	}
	q.items = append(q.items, d)
	s.hooksOut.busy++
	if q.running {
		return
	}
	q.running = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.drain(q)
	}()
}

// drain sends the deliveries of one hook in order until its queue is
// empty or the server closes.
func (s *Server) drain(q *hookQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(q.items) > 0 {
		d := q.items[0]
		q.items = q.items[1:]
		if s.ctx.Err() != nil {
			d.State, d.Err = DeliveryDropped, "server closed"
			s.hooksOut.busy--
			s.notify()
			continue
		}
		h := s.deliveryHook(d)
		if h == nil {
			d.State, d.Err = DeliveryDropped, "hook deleted"
			s.hooksOut.busy--
			s.notify()
			continue
		}
		// GitLab's worker loads the hook when it runs: current URL and token.
		d.URL, d.WebhookUUID, d.State, d.SentAt = h.url, newUUID(), DeliverySending, s.now()
		req := outgoing{url: h.url, token: h.token, d: *d, at: s.now()}
		if s.signing == SigningSupported {
			req.signingToken = h.signingToken
		}
		s.notify()
		s.mu.Unlock()
		started := time.Now()
		code, err := s.send(req)
		elapsed := time.Since(started)
		s.mu.Lock()
		d.StatusCode, d.Elapsed = code, elapsed
		ok := err == nil && code >= 200 && code < 300
		switch {
		case !ok && s.ctx.Err() != nil:
			// Cut short by Close: not the receiver's failure.
			d.State, d.Err = DeliveryDropped, "server closed"
			s.hooksOut.busy--
			s.notify()
			continue
		case ok:
			d.State = DeliveryDelivered
		case err != nil:
			d.State, d.Err = DeliveryFailed, err.Error()
		default:
			d.State = DeliveryFailed
		}
		s.hookResult(d, ok)
		s.hooksOut.busy--
		s.notify()
	}
	q.running = false
}

type outgoing struct {
	url, token   string
	signingToken string // "" for an unsigned delivery
	at           time.Time
	d            Delivery
}

// send posts one delivery with GitLab's headers and returns the status.
func (s *Server) send(o outgoing) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.hookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(o.d.Payload))
	if err != nil {
		return 0, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitLab/"+s.version)
	h.Set("X-Gitlab-Event", o.d.Event)
	h.Set("X-Gitlab-Instance", s.URL)
	h.Set("X-Gitlab-Webhook-UUID", o.d.WebhookUUID)
	h.Set("X-Gitlab-Event-UUID", o.d.EventUUID)
	h.Set("Idempotency-Key", o.d.IdempotencyKey)
	if o.token != "" {
		h.Set("X-Gitlab-Token", o.token)
	}
	if o.signingToken != "" {
		// Standard Webhooks, as GitLab 19.0 signs: webhook-id is the
		// Idempotency-Key, the timestamp the time of this attempt.
		ts := strconv.FormatInt(o.at.Unix(), 10)
		h.Set("webhook-id", o.d.IdempotencyKey)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", signature(o.signingToken, o.d.IdempotencyKey, ts, o.d.Payload))
	}
	resp, err := s.hookClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

// deliveryHook is the hook a delivery goes to (a group hook when
// d.GroupID is set), or nil when it was deleted. Callers hold s.mu.
func (s *Server) deliveryHook(d *Delivery) *hook {
	var hooks []*hook
	if d.GroupID != 0 {
		g, ok := s.inst.groups[d.GroupID]
		if !ok {
			return nil
		}
		hooks = g.hooks
	} else {
		p, ok := s.inst.projects[d.ProjectID]
		if !ok {
			return nil
		}
		hooks = p.hooks
	}
	for _, h := range hooks {
		if h.id == d.HookID {
			return h
		}
	}
	return nil
}

// hookResult counts a delivery's outcome the way GitLab's auto-disabling
// does: a success resets the hook; after failThreshold consecutive failures
// the hook is disabled for one minute, doubling with each further failure
// up to a day, and for good after 40. Callers hold s.mu.
func (s *Server) hookResult(d *Delivery, ok bool) {
	h := s.deliveryHook(d)
	if h == nil {
		return
	}
	if ok {
		// Any successful delivery (a test request or a resend can reach a
		// disabled hook) re-enables the hook, as GitLab's WebHook#enable!.
		h.recentFailures, h.backoffCount = 0, 0
		h.alertStatus, h.disabledUntil = "executable", time.Time{}
		return
	}
	if s.failThreshold < 0 || h.alertStatus == "disabled" {
		return
	}
	now := s.now()
	h.recentFailures++
	switch {
	case h.recentFailures >= permanentFailures:
		h.alertStatus, h.disabledUntil = "disabled", time.Time{}
	case h.recentFailures >= s.failThreshold && h.executable(now):
		backoff := maxBackoff
		if h.backoffCount < 11 { // 2^11 minutes > 24 h
			backoff = min(time.Minute<<h.backoffCount, maxBackoff)
		}
		h.backoffCount++
		h.alertStatus, h.disabledUntil = "temporarily_disabled", now.Add(backoff)
	}
}

// Deliveries returns the log of webhook deliveries, oldest first.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Delivery, 0, len(s.hooksOut.deliveries))
	for _, d := range s.hooksOut.deliveries {
		c := *d
		c.Payload = slices.Clone(d.Payload)
		out = append(out, c)
	}
	return out
}

// Resend sends a logged delivery again, as GitLab's "Resend request" does:
// same payload and Idempotency-Key, new X-Gitlab-Webhook-UUID, to the
// hook's current URL, whether or not the hook is disabled. Lost-delivery
// faults do not apply. It returns the new delivery's id.
func (s *Server) Resend(deliveryID int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if deliveryID < 1 || deliveryID > int64(len(s.hooksOut.deliveries)) {
		return 0, fmt.Errorf("resend delivery %d: not found", deliveryID)
	}
	old := s.hooksOut.deliveries[deliveryID-1]
	if s.deliveryHook(old) == nil {
		return 0, fmt.Errorf("resend delivery %d: hook %d not found", deliveryID, old.HookID)
	}
	d := *old
	d.ResendOf = old.ID
	d.EventUUID, d.WebhookUUID = newUUID(), ""
	d.StatusCode, d.Err, d.SentAt, d.Elapsed = 0, "", time.Time{}, 0
	d.QueuedAt = s.now()
	s.enqueue(&d)
	return d.ID, nil
}

// LoseWebhooks makes the next n deliveries (of any project) vanish, as a
// webhook that never arrives: they are logged as "lost" and never sent.
func (s *Server) LoseWebhooks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooksOut.loseAll = max(0, s.hooksOut.loseAll+n)
}

// LoseProjectWebhooks makes the next n deliveries of the project's hooks
// vanish. They are lost before those LoseWebhooks asked for.
func (s *Server) LoseProjectWebhooks(projectPath string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("lose webhooks of %s: project not found", projectPath)
	}
	s.hooksOut.loseProject[p.id] = max(0, s.hooksOut.loseProject[p.id]+n)
	return nil
}

// WaitDeliveries waits until the delivery log holds n deliveries (in any
// state) and none of them is queued or in flight, and returns the log.
func (s *Server) WaitDeliveries(ctx context.Context, n int) ([]Delivery, error) {
	err := s.waitFor(ctx, func() bool {
		if len(s.hooksOut.deliveries) < n {
			return false
		}
		for _, d := range s.hooksOut.deliveries {
			if d.State == DeliveryQueued || d.State == DeliverySending {
				return false
			}
		}
		return true
	})
	if err != nil {
		return s.Deliveries(), fmt.Errorf("wait for %d webhook deliveries: %w", n, err)
	}
	return s.Deliveries(), nil
}

// signature is the webhook-signature value of a delivery: "v1," and the
// base64 HMAC-SHA256, keyed by the token's decoded key, of
// "{webhook-id}.{webhook-timestamp}.{body}".
func signature(token, id, ts string, body []byte) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(token, "whsec_"))
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, ts)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// branchMatches applies a hook's push_events_branch_filter (wildcard
// strategy: * matches any run of characters, including /).
func branchMatches(filter, branch string) bool {
	if filter == "" {
		return true
	}
	// path.Match's * stops at '/': compare with '/' swapped out.
	swap := func(v string) string { return strings.ReplaceAll(v, "/", "\x00") }
	ok, err := path.Match(swap(filter), swap(branch))
	return err == nil && ok
}
