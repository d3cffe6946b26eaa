package gitlab

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitTransport is where every HTTP request to GitLab passes, retries
// included: it bounds the requests in flight, applies the client-side rate
// limit (both in the order of the requests' priority, see limiter) and
// counts what is sent. Putting this below client-go (rather than around
// API calls) makes the bounds hold for every attempt.
type limitTransport struct {
	next     http.RoundTripper
	limits   *limiter
	timeout  time.Duration // per request, from leaving the queue to the body's close; 0: none
	requests atomic.Int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := t.limits.wait(ctx, PriorityOf(ctx)); err != nil {
		return nil, err
	}
	t.requests.Add(1)
	cancel := context.CancelFunc(func() {})
	if t.timeout > 0 {
		var sendCtx context.Context
		sendCtx, cancel = context.WithTimeout(ctx, t.timeout)
		req = req.WithContext(sendCtx)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		cancel()
		t.limits.release()
		return nil, err
	}
	// The slot is held until the body is consumed, so that a slow download
	// counts as in flight.
	resp.Body = &releaseBody{ReadCloser: resp.Body, release: func() { cancel(); t.limits.release() }}
	return resp, nil
}

type releaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// errCrossHostRedirect stops a redirect that would carry the PRIVATE-TOKEN
// header (which net/http does not strip, unlike Authorization) to another
// host; errPlainHTTPRedirect one from https to plain HTTP, which would send
// it in clear.
var (
	errCrossHostRedirect = errors.New("refusing to follow a redirect to another host")
	errPlainHTTPRedirect = errors.New("refusing to follow a redirect from https to plain http")
)

func sameHostRedirect(prev func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && req.URL.Host != via[0].URL.Host {
			return errCrossHostRedirect
		}
		if len(via) > 0 && via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
			return errPlainHTTPRedirect
		}
		if prev != nil {
			return prev(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}
