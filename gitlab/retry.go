package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// request is one API call made through client-go; it receives the request
// options (context) to pass on.
type request func(opts ...gl.RequestOptionFunc) (*gl.Response, error)

// call sends req, retrying with exponential backoff and jitter on 429, 5xx
// and network errors, and waiting at least as long as Retry-After (or
// RateLimit-Reset) asks. Other 4xx are returned at once. This is the only
// retry layer: client-go's own is switched off (see New).
//
// A 429 also slows the whole client down (slowDown): new calls wait until
// the time GitLab named, and the client-side rate limit drops to GitLab's
// RateLimit-Limit when that is lower.
//
// A request that is not idempotent (POST) is retried only when GitLab
// surely did not act on it: a 429, or a connection that could not be made.
// A 5xx or a broken connection after sending may mean a pipeline was
// created; the error is returned (IsRetryable reports true) so the caller
// can check before sending again.
func (c *Client) call(ctx context.Context, idempotent bool, req request) error {
	for attempt := 1; ; attempt++ {
		if attempt == 1 {
			// After a 429 every new call waits until GitLab's reset; a
			// retry already waited at least that long in its backoff.
			if err := c.pause.wait(ctx, c.cfg.Now, c.cfg.Sleep); err != nil {
				return fmt.Errorf("gitlab request: %w", err)
			}
		}
		resp, err := req(gl.WithContext(ctx))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gitlab request: %w", ctx.Err())
		}
		ae := c.apiError(resp, err, attempt)
		if ae.throttle() {
			c.throttled.Add(1)
		}
		if ae.Status == http.StatusTooManyRequests {
			// Every call of this client waits out GitLab's reset, whether
			// or not this one is retried (last attempt, a POST, a wait
			// longer than MaxRetryAfter).
			c.slowDown(resp, c.throttledFor(resp))
		}
		if !ae.retryable || attempt > c.cfg.MaxRetries || ae.Status == http.StatusBadRequest {
			return ae
		}
		if !idempotent && ae.Status != http.StatusTooManyRequests && !notSent(err) {
			return ae
		}
		wait, ok := c.backoff(attempt, resp)
		if !ok {
			ae.Message += fmt.Sprintf(" (server asks to wait %s, more than %s)", wait, c.cfg.MaxRetryAfter)
			return ae
		}
		c.log.Warn("retrying GitLab request", "method", ae.Method, "path", ae.Path,
			"status", ae.Status, "attempt", attempt, "wait", wait, "err", ae.Message)
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("gitlab request: %w", err)
		}
	}
}

// notSent reports a network error from before the request was written.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// backoff returns how long to wait before retry number attempt. ok is false
// when the server asks for a longer wait than MaxRetryAfter.
func (c *Client) backoff(attempt int, resp *gl.Response) (time.Duration, bool) {
	d := c.cfg.BackoffBase
	for i := 1; i < attempt && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.BackoffMax)
	d = d/2 + rand.N(d/2+1) // jitter: spread clients that failed together
	if resp != nil && resp.Response != nil {
		if ra, ok := retryAfter(resp.Header, c.cfg.Now()); ok {
			if ra > c.cfg.MaxRetryAfter {
				return ra, false
			}
			d = max(d, ra)
		}
	}
	return d, true
}

// throttledFor is how long GitLab asks a throttled client to wait: its
// Retry-After or RateLimit-Reset, else the first backoff step.
func (c *Client) throttledFor(resp *gl.Response) time.Duration {
	if resp != nil && resp.Response != nil {
		if ra, ok := retryAfter(resp.Header, c.cfg.Now()); ok {
			return ra
		}
	}
	return c.cfg.BackoffBase
}

// retryAfter reads Retry-After (seconds or an HTTP date), falling back to
// GitLab's RateLimit-Reset (epoch seconds).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
			return time.Duration(secs) * time.Second, true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(0, t.Sub(now)), true
		}
	}
	if v := strings.TrimSpace(h.Get("RateLimit-Reset")); v != "" {
		if epoch, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(0, time.Unix(epoch, 0).Sub(now)), true
		}
	}
	return 0, false
}

// apiError turns what client-go returned into an APIError with the token
// removed from every string.
func (c *Client) apiError(resp *gl.Response, err error, attempts int) *APIError {
	ae := &APIError{Attempts: attempts}
	if resp != nil && resp.Response != nil {
		ae.Status = resp.StatusCode
		if r := resp.Request; r != nil {
			ae.Method, ae.Path = r.Method, r.URL.EscapedPath()
		}
	}
	var er *gl.ErrorResponse
	var ue *url.Error
	switch {
	case errors.As(err, &er):
		ae.Message = gitlabMessage(er.Body, er.Message)
		if ae.Status == 0 {
			ae.Status = er.StatusCode
		}
	case errors.As(err, &ue):
		ae.Method = strings.ToUpper(ue.Op)
		if u, perr := url.Parse(ue.URL); perr == nil {
			ae.Path = u.EscapedPath()
		}
		ae.Message = ue.Err.Error()
	default:
		ae.Message = err.Error()
	}
	if ae.Status >= 200 && ae.Status < 300 {
		// The answer came but could not be decoded: not worth retrying.
		ae.Message = c.red.redact("unexpected response: " + ae.Message)
		return ae
	}
	if ae.Message == http.StatusText(ae.Status) || ae.Message == fmt.Sprintf("%d %s", ae.Status, http.StatusText(ae.Status)) {
		ae.Message = ""
	}
	ae.Message = c.red.redact(ae.Message)
	ae.Path = c.red.redact(ae.Path)
	ae.classify()
	return ae
}

// gitlabMessage extracts GitLab's error text from a response body:
// {"message": "..."}, {"message": ["..."]} (a model's errors, as for a
// merge request), {"message": {"field": ["..."]}} or {"error": "...",
// "error_description": "..."}; other bodies are shortened.
func gitlabMessage(body []byte, fallback string) string {
	var m struct {
		Message     any    `json:"message"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if len(body) == 0 {
		return fallback
	}
	if err := json.Unmarshal(body, &m); err != nil {
		s := strings.Join(strings.Fields(string(body)), " ")
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		return s
	}
	switch msg := m.Message.(type) {
	case string:
		return msg
	case map[string]any:
		keys := make([]string, 0, len(msg))
		for k := range msg {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s: %v", k, flatten(msg[k])))
		}
		return strings.Join(parts, "; ")
	case []any:
		return flatten(msg)
	}
	if m.Error != "" {
		return strings.TrimSuffix(m.Error+": "+m.Description, ": ")
	}
	return fallback
}

func flatten(v any) string {
	if list, ok := v.([]any); ok {
		parts := make([]string, 0, len(list))
		for _, x := range list {
			parts = append(parts, fmt.Sprint(x))
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

// pauseGate holds new calls back until a time GitLab named in a 429.
type pauseGate struct {
	mu    sync.Mutex
	until time.Time
}

// extend moves the end of the pause to t unless it is already later.
func (g *pauseGate) extend(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.After(g.until) {
		g.until = t
	}
}

// wait returns when the pause is over or ctx ends.
func (g *pauseGate) wait(ctx context.Context, now func() time.Time, sleep func(context.Context, time.Duration) error) error {
	g.mu.Lock()
	until := g.until
	g.mu.Unlock()
	if d := until.Sub(now()); d > 0 {
		return sleep(ctx, d)
	}
	return nil
}

// rateLimitWindow is GitLab's rate-limit period for the API throttles:
// requests are counted per minute.
const rateLimitWindow = time.Minute

// slowDown reacts to a 429: every call made from now on waits wait (the
// retry delay, at least what Retry-After or RateLimit-Reset asked), and
// when GitLab announces its limit (RateLimit-Limit, requests a minute)
// below the client's own, the client's limit drops to it for GitLab's
// window (until RateLimit-Reset, at least a minute): the throttle hit may
// be one endpoint's, and a later 429 lowers it again.
func (c *Client) slowDown(resp *gl.Response, wait time.Duration) {
	c.pause.extend(c.cfg.Now().Add(wait))
	lim := c.transport.limits
	if !lim.limited() || resp == nil || resp.Response == nil {
		return
	}
	perMinute, err := strconv.ParseFloat(strings.TrimSpace(resp.Header.Get("RateLimit-Limit")), 64)
	if err != nil || perMinute <= 0 {
		return
	}
	if perMinute < lim.perMinute() {
		d := rateLimitWindow
		if reset, err := strconv.ParseInt(strings.TrimSpace(resp.Header.Get("RateLimit-Reset")), 10, 64); err == nil {
			d = max(d, time.Unix(reset, 0).Sub(c.cfg.Now()))
		}
		lim.lowerFor(perMinute, d)
		c.log.Warn("GitLab's rate limit is below the client's: slowing down", "requests_per_minute", perMinute, "for", d)
	}
}
