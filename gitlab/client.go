package gitlab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"gitlab.com/depsd/depsd/buildinfo"
)

// Config configures a Client. Zero values take the documented defaults.
type Config struct {
	// BaseURL is the instance URL, e.g. https://gitlab.example.com; the
	// /api/v4 suffix is added (and accepted if already there).
	BaseURL string
	// Token is a personal, group or project access token with api scope.
	// It is sent in the PRIVATE-TOKEN header and never logged or put in an
	// error.
	Token string
	// OAuth says Token is an OAuth 2 access token (a person's, from
	// GitLab's sign-in), sent as Authorization: Bearer instead.
	OAuth bool
	// Concurrency bounds the requests in flight. Default 8.
	Concurrency int
	// RequestsPerMinute is the client-side rate limit. Default 2,000,
	// gitlab.com's limit for authenticated API traffic; a 429 slows the
	// client down further by itself (see call). Negative disables the
	// limit (tests against the fake).
	RequestsPerMinute int
	// MaxRetries is how often a failed request is retried. Default 5;
	// negative disables retries.
	MaxRetries int
	// BackoffBase is the first retry delay, doubled on each retry up to
	// BackoffMax, with jitter. Defaults 500ms and 30s.
	BackoffBase, BackoffMax time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; a
	// server asking for more makes the call fail (retryable) instead of
	// blocking. Default 2 minutes.
	MaxRetryAfter time.Duration
	// ActivityWindow is how long GitLab may leave last_activity_at stale
	// after a push (it updates it at most hourly); see the package doc.
	// Default 70 minutes.
	ActivityWindow time.Duration
	// PerPage is the page size of list requests. Default 100 (GitLab's
	// maximum).
	PerPage int
	// HTTPClient is used for requests (not modified: the client works on
	// a copy). Default: a pooled client with a 60 s timeout.
	HTTPClient *http.Client
	// Logger receives retry and sync messages. Default: discard.
	Logger *slog.Logger
	// UserAgent is sent with every request, so GitLab admins can tell
	// depsd's traffic apart. Default depsd/<version> (package buildinfo).
	UserAgent string
	// Sleep waits for d or until ctx ends. Tests inject it so retries do
	// not really sleep. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock used for head-state bookkeeping and Retry-After
	// dates. Default time.Now.
	Now func() time.Time
}

// String hides the token, so printing a Config cannot leak it.
func (c Config) String() string {
	return fmt.Sprintf("gitlab.Config{BaseURL: %q, Token: %s, Concurrency: %d, RequestsPerMinute: %d, MaxRetries: %d}",
		redactor{}.redact(c.BaseURL), maskToken(c.Token), c.Concurrency, c.RequestsPerMinute, c.MaxRetries)
}

// GoString hides the token from %#v too.
func (c Config) GoString() string { return c.String() }

// LogValue hides the token from slog.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", redactor{}.redact(c.BaseURL)),
		slog.String("token", maskToken(c.Token)),
		slog.Int("concurrency", c.Concurrency),
	)
}

func maskToken(t string) string {
	if t == "" {
		return `""`
	}
	return redacted
}

func (c *Config) setDefaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.RequestsPerMinute == 0 {
		c.RequestsPerMinute = 2000
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = 500 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 30 * time.Second
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = 2 * time.Minute
	}
	if c.ActivityWindow <= 0 {
		c.ActivityWindow = 70 * time.Minute
	}
	if c.PerPage <= 0 || c.PerPage > 100 {
		c.PerPage = 100
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Client talks to one GitLab instance. It is safe for concurrent use; the
// concurrency and rate bounds are shared by all calls.
type Client struct {
	cfg       Config
	gl        *gl.Client
	transport *limitTransport
	pause     *pauseGate
	log       *slog.Logger
	red       redactor

	userMu sync.Mutex
	user   *User // the token's user, once read (CurrentUser)
	// namesPerQuery is how many file names one GraphQL read may ask for,
	// learnt when GitLab refuses one as too complex; 0: all.
	namesPerQuery atomic.Int64
	// complexityLimit is GitLab's complexity limit as its last refusal
	// said (0: not refused yet), complexityExtra how much more than
	// planned GitLab counted (ReadBatch, ReadFilesAt).
	complexityLimit, complexityExtra atomic.Int64
	// noBranchNames: this GitLab's GraphQL has no Repository.branchNames
	// (ReadBatch reads no refs then).
	noBranchNames atomic.Bool
	// signingIgnored: this GitLab answered a hook write that carried a
	// signing token without keeping it (SyncHooks).
	signingIgnored atomic.Bool
	// signingKnown: whether this GitLab keeps signing tokens is known: it
	// answered a hook write that carried one, or listed a depsd hook with
	// signing_token_present true or without the field (before 19.0).
	signingKnown atomic.Bool
	// throttled counts GitLab's throttle answers (see Throttled).
	throttled atomic.Int64
}

// New validates cfg and builds a Client. It sends no request.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if cfg.Token == "" {
		return nil, errors.New("gitlab: no API token configured")
	}
	base, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("gitlab: base URL %q is not an http(s) URL", redactor{token: cfg.Token}.redact(cfg.BaseURL))
	}
	base.Path = strings.TrimSuffix(strings.TrimSuffix(base.Path, "/"), "/api/v4")
	cfg.BaseURL = base.String()

	hc := &http.Client{Timeout: 60 * time.Second}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	next := hc.Transport
	if next == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = cfg.Concurrency
		next = t
	}
	// The timeout of one request starts when it leaves the client's own
	// queue (concurrency and rate limit): a long queue in front of a
	// healthy GitLab must not time requests out.
	// The rate limiter runs on the real clock (cfg.Now may be a test's
	// frozen one). Its burst is the concurrency: a full set of requests
	// in flight may start at once.
	lt := &limitTransport{next: next, timeout: hc.Timeout,
		limits: newLimiter(cfg.Concurrency, cfg.RequestsPerMinute, cfg.Concurrency, time.Now, realAfterFunc)}
	hc.Timeout = 0
	hc.Transport = lt
	hc.CheckRedirect = sameHostRedirect(hc.CheckRedirect)

	// Retries are ours (retry.go), not client-go's: its retryablehttp layer
	// reads RateLimit-Reset but not Retry-After and would multiply with ours.
	// Its self-configuring limiter is replaced by ours in limitTransport.
	newClient := gl.NewClient
	if cfg.OAuth {
		newClient = gl.NewOAuthClient
	}
	g, err := newClient(cfg.Token,
		gl.WithBaseURL(cfg.BaseURL+"/api/v4"),
		gl.WithHTTPClient(hc),
		gl.WithoutRetries(),
		gl.WithCustomLimiter(noLimit{}),
		gl.WithUserAgent(cmp.Or(cfg.UserAgent, buildinfo.UserAgent())),
		gl.WithURLWarningLogger(cfg.Logger),
		gl.WithCustomLogger(discardLogger{}),
	)
	if err != nil {
		return nil, fmt.Errorf("gitlab: %s", redactor{token: cfg.Token}.redact(err.Error()))
	}
	return &Client{
		cfg:       cfg,
		gl:        g,
		transport: lt,
		pause:     &pauseGate{},
		log:       cfg.Logger.With("component", "gitlab"),
		red:       redactor{token: cfg.Token},
	}, nil
}

// WithToken returns a client of the same instance and settings that acts
// with another token: a person's personal access token, or with oauth
// their OAuth 2 access token. It reuses c's connections but has limits of
// its own (GitLab counts each user's requests apart), and reads what that
// person may see (ListVisibleProjects, ProjectMemberAccess). It sends no
// request.
func (c *Client) WithToken(token string, oauth bool) (*Client, error) {
	cfg := c.cfg
	cfg.Token, cfg.OAuth = token, oauth
	cfg.HTTPClient = &http.Client{Transport: c.transport.next, Timeout: c.transport.timeout}
	return New(cfg)
}

// Requests returns the number of HTTP requests sent so far, retries
// included.
func (c *Client) Requests() int64 { return c.transport.requests.Load() }

// Throttled returns how many answers so far said GitLab's rate limit was
// exhausted: a 429, or the 400 of its pipeline-creation limit ("Too many
// pipelines"). Each attempt counts, retries included.
func (c *Client) Throttled() int64 { return c.throttled.Load() }

// Queued says how long the requests of priority p waited for the
// client's own limits so far: how much the rate limit and the requests in
// flight hold back that kind of work.
func (c *Client) Queued(p Priority) QueueStats { return c.transport.limits.queueStats(p) }

// HoldNormal makes requests of PriorityNormal wait while held, as they
// wait while urgent requests do (at most 10 minutes each). The outbox
// holds them while it has pipeline creations due that are not yet waiting
// for the limits (between two sends, or between an event that makes
// creates due and their sends), so no background read takes the rate a
// chain's creates are due to use.
func (c *Client) HoldNormal(held bool) { c.transport.limits.hold(held) }

// BaseURL returns the instance URL without /api/v4.
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

type noLimit struct{}

func (noLimit) Wait(context.Context) error { return nil }

// discardLogger silences retryablehttp, whose debug lines include URLs.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
