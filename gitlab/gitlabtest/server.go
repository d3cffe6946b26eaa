// Package gitlabtest is a fake GitLab REST API v4 server over real HTTP, for
// tests, benchmarks and the demo.
//
// It keeps an in-memory instance (groups, projects with commits and files,
// pipelines, project hooks) and answers the endpoints depsd uses with the JSON
// shapes, status codes and pagination headers GitLab documents. Faults
// (latency, 429 with Retry-After, 5xx) can be injected, GitLab's pipeline
// creation rate limit switched on (PipelineCreationLimit), and every request is
// counted per endpoint, so callers can assert how many requests an operation
// cost. All methods are safe for concurrent use. Nothing here depends on the
// testing package: the demo runs it in-process.
//
// Pipelines run: with a Behavior (Options.Pipelines or
// Server.SetPipelineBehavior) a created pipeline goes pending, running and
// then success, failed or canceled over a set duration. Every status change
// posts a "Pipeline Hook" event, and every push (SetFile, DeleteFile) a
// "Push Hook" event, over real HTTP to the project's hooks, with GitLab's
// payloads and headers. Deliveries are asynchronous, ordered per hook,
// logged (Server.Deliveries), can be resent with the same Idempotency-Key
// (Server.Resend) or lost on purpose (Server.LoseWebhooks), and failing hooks
// are disabled as GitLab does. The goroutines that run pipelines and deliver
// webhooks belong to the Server: Close stops them and waits for them.
//
// Repositories have branches (the default one protected, as on GitLab),
// tags, commits made through the API from file actions, and merge requests
// with their pipelines, merges and notes (refs.go, tags.go, branches.go,
// commits.go, mergerequests.go, notes.go); every push goes through one
// path (pushed) that posts its hooks and starts the pipelines the
// project's Behavior asks for.
//
// A project's pipelines can also be made of real jobs (Behavior.Jobs): the
// jobs of the commit's .gitlab-ci.yml are handed to real GitLab Runners
// through GitLab's runner-facing jobs API, which clone the project over
// git's HTTP protocol from the server (jobs.go, githttp.go).
//
// What it holds: a fake GitLab for tests, benchmarks
// and `depsd demo`: REST v4 subset with offset and keyset pagination, a
// GraphQL subset with GitLab's complexity rules and limits (gqlparser),
// per-project pipeline-variables settings and inputs checked against the
// CI configuration's `spec:` header, `include: component:` of CI/CD
// components held by its projects (`components.go`), repository refs
// (tags, branches, protected branches, commits with actions) and merge
// requests with their pipelines and notes, simulated pipelines (which may
// push images to a real registry), pipelines of real jobs handed to real
// GitLab Runners through GitLab's jobs API with sources served over git's
// HTTP protocol (`jobs.go`, `githttp.go`), project and group hooks, signed
// real-format webhooks, external commit statuses with GitLab's state
// machine (`statuses.go`), the registry tag API over a real registry
// (`registrytags.go`), users with roles and project visibility checked per
// request (`users.go`), an OAuth 2 provider with PKCE (`oauth.go`)
package gitlabtest

import (
	"cmp"
	"context"
	"crypto/subtle"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
)

// DefaultToken is the API token the server accepts when Options.Token is empty.
const DefaultToken = "glpat-gitlabtest-0123456789"

// DefaultRegistryHost is the container registry host used in
// container_registry_image_prefix when Options.RegistryHost is empty.
const DefaultRegistryHost = "registry.example.com"

// Options configure a Server. The zero value is usable.
type Options struct {
	// Token is the only token accepted (PRIVATE-TOKEN header, Authorization:
	// Bearer, or the private_token query parameter).
	Token string
	// RegistryHost prefixes container_registry_image_prefix.
	RegistryHost string
	// Latency delays every request before it is answered.
	Latency time.Duration
	// Now is the server's clock; it stamps created_at, last_activity_at,
	// pipeline and hook times. Defaults to time.Now.
	Now func() time.Time
	// ActivityThrottle mimics GitLab, which moves a project's
	// last_activity_at on a push only when the stored value is older than
	// one hour. Zero means one hour; a negative value updates it on every
	// push.
	ActivityThrottle time.Duration
	// Pipelines is how pipelines of projects without a behavior of their
	// own (SetPipelineBehavior) run. The zero value is manual: pipelines
	// stay "created" until SetPipelineStatus moves them.
	Pipelines Behavior
	// PipelineCreationLimit throttles POST /projects/:id/pipeline as
	// GitLab's pipeline creation rate limit does; zero: no limit.
	PipelineCreationLimit PipelineCreationLimit
	// Version is the GitLab version GET /version answers and webhook
	// User-Agent headers carry ("GitLab/<version>"). Defaults to
	// DefaultVersion.
	Version string
	// WebhookTimeout is how long a webhook delivery may take before it
	// counts as failed. Defaults to 10 s, as on GitLab.
	WebhookTimeout time.Duration
	// HookFailureThreshold is the number of consecutive failed deliveries
	// after which a hook is temporarily disabled (1 minute, doubling at each
	// further failure up to 24 hours; permanently after 40 failures), as
	// GitLab does. Zero means 4, GitLab's value; negative never disables.
	HookFailureThreshold int
	// RunnerToken is the runner authentication token POST /jobs/request
	// accepts (pipelines with Behavior.Jobs). Defaults to
	// DefaultRunnerToken.
	RunnerToken string
	// JobsLongPoll is how long POST /jobs/request waits for a job before
	// answering 204. Defaults to DefaultJobsLongPoll.
	JobsLongPoll time.Duration
	// GitDir is where the repositories runners clone are written (see
	// githttp.go); empty: a temporary directory removed by Close.
	GitDir string
	// OnRequest, when set, is called as each API request arrives (before
	// its latency), with the endpoint's name as Requests names it: the
	// benchmarks use it to see which requests came when.
	OnRequest func(endpoint string)
}

// DefaultVersion is the GitLab version the fake claims in webhook
// User-Agent headers when Options.Version is empty.
const DefaultVersion = "17.11.1"

// Server is a running fake GitLab instance. Create it with New and stop it
// with Close.
type Server struct {
	// URL is the instance base URL (without /api/v4), e.g. http://127.0.0.1:4321.
	URL string
	// Token is the accepted API token.
	Token string

	registryHost string
	now          func() time.Time // GitLab's millisecond precision
	preciseNow   func() time.Time // the clock itself, for Pipeline.Requested
	throttle     time.Duration
	latency      atomic.Int64
	http         *httptest.Server
	onRequest    func(endpoint string)

	mu   sync.Mutex
	inst *instance

	stats stats

	// Background work (simulated pipelines, webhook deliveries): every
	// goroutine is counted in wg and ends when ctx is canceled.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	version       string
	hookTimeout   time.Duration
	failThreshold int
	hookClient    *http.Client
	hookTransport *http.Transport

	// Guarded by mu.
	closed          bool
	changed         chan struct{} // closed and replaced on every change waiters may look for
	defaultBehavior Behavior
	defaultScript   behaviorState            // position in Options.Pipelines.Script
	behaviors       map[int64]*behaviorState // by project id
	runs            int                      // simulated pipelines not yet finished
	hooksOut        hookState
	createLimit     PipelineCreationLimit
	signing         WebhookSigning
	premium         bool            // group hooks exist (SetPremium)
	notOwner        map[string]bool // lower-case group path → Owner role denied (SetGroupOwner)
	createCounts    *createThrottle

	// Real jobs (jobs.go, githttp.go); guarded by mu.
	runnerToken     string
	jobsLongPoll    time.Duration
	jobs            map[int64]*job
	nextJob         int64
	gitRoot         string
	gitRootOwned    bool
	gitRepos        map[int64]*gitRepo // by project id
	gqlSchema       *ast.Schema        // graphQLSchema, or the old GitLab's (SetOldGraphQL)
	graphQLAdmin    bool
	graphQLTimeouts []string
	offsetLimit     int // GET /projects offset pagination limit; <= 0: none
	countLimit      int // records past which listings are not counted (maxCountedRecords)

	// ignoredPipelineFilters are the pipeline list's query parameters
	// this GitLab ignores (SetIgnoredPipelineFilters).
	ignoredPipelineFilters []string

	// registry is what simulated pipelines push (images.go).
	registry registrySide

	// Guarded by mu: users, tokens, visibility, members and OAuth
	// (users.go, oauth.go); commit statuses (statuses.go); container
	// repositories (registrytags.go).
	auth       authState
	statuses   statusState
	containers containerState
}

// New starts a fake GitLab on a loopback port.
func New(opts Options) *Server {
	s := &Server{
		Token:        opts.Token,
		registryHost: opts.RegistryHost,
		throttle:     opts.ActivityThrottle,
		onRequest:    opts.OnRequest,
	}
	if s.Token == "" {
		s.Token = DefaultToken
	}
	if s.registryHost == "" {
		s.registryHost = DefaultRegistryHost
	}
	clock := opts.Now
	if clock == nil {
		clock = time.Now
	}
	// Stored times have GitLab's millisecond precision, so what the API
	// answers equals what the fake reports.
	s.now = func() time.Time { return clock().UTC().Truncate(time.Millisecond) }
	s.preciseNow = clock
	if s.throttle == 0 {
		s.throttle = time.Hour
	}
	s.latency.Store(int64(opts.Latency))
	s.inst = newInstance()
	s.stats.counts = map[string]int64{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.version = cmp.Or(opts.Version, DefaultVersion)
	s.hookTimeout = cmp.Or(opts.WebhookTimeout, 10*time.Second)
	s.failThreshold = cmp.Or(opts.HookFailureThreshold, 4)
	s.hookTransport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	s.hookClient = &http.Client{
		Transport: s.hookTransport,
		Timeout:   s.hookTimeout,
		// GitLab does not follow redirects for webhooks: a 3xx is a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s.changed = make(chan struct{})
	s.defaultBehavior = opts.Pipelines
	s.createLimit = opts.PipelineCreationLimit
	s.behaviors = map[int64]*behaviorState{}
	s.hooksOut.init()
	s.runnerToken = cmp.Or(opts.RunnerToken, DefaultRunnerToken)
	s.jobsLongPoll = cmp.Or(opts.JobsLongPoll, DefaultJobsLongPoll)
	s.jobs = map[int64]*job{}
	s.gitRoot = opts.GitDir
	s.gitRepos = map[int64]*gitRepo{}
	s.gqlSchema = loadGraphQLSchema(false, false)
	s.offsetLimit = DefaultOffsetPaginationLimit
	s.countLimit = maxCountedRecords
	s.http = httptest.NewServer(s.routes())
	s.URL = s.http.URL
	return s
}

// RegistryHost is the host of the projects' container_registry_image_prefix
// (Options.RegistryHost, or DefaultRegistryHost).
func (s *Server) RegistryHost() string { return s.registryHost }

// Close shuts the server down: it stops simulated pipelines where they
// are, abandons queued webhook deliveries (recorded as "dropped"), cancels
// those in flight, waits for all of its goroutines, and then for in-flight
// API requests. Close may be called more than once.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.hookTransport.CloseIdleConnections()
	s.http.Close()
	s.removeGitRoot()
}

// notify wakes everyone waiting for a change. Callers hold s.mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitFor blocks until cond, evaluated under s.mu after every change, is
// true, or ctx ends.
func (s *Server) waitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		if cond() {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// APIURL is URL + "/api/v4".
func (s *Server) APIURL() string { return s.URL + "/api/v4" }

// SetLatency changes the per-request latency.
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// route is one API endpoint. name is how the endpoint is counted and how
// faults select it, in GitLab's documentation style: "GET /projects/:id".
type route struct {
	name    string
	handler http.HandlerFunc
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range []route{
		{"GET /version", s.getVersion},
		{"GET /user", s.currentUser},
		{"GET /groups/:id", s.getGroup},
		{"GET /groups/:id/projects", s.listGroupProjects},
		{"GET /projects", s.listProjects},
		{"GET /projects/:id", s.getProject},
		{"GET /projects/:id/repository/files/:file_path/raw", s.getRawFile},
		{"GET /projects/:id/repository/tree", s.listTree},
		{"GET /projects/:id/repository/blobs/:sha/raw", s.getRawBlob},
		{"POST /projects/:id/pipeline", s.createPipeline},
		{"GET /projects/:id/pipelines", s.listPipelines},
		{"GET /projects/:id/pipelines/:pipeline_id", s.getPipeline},
		{"GET /projects/:id/pipelines/:pipeline_id/variables", s.getPipelineVariables},
		{"POST /projects/:id/pipelines/:pipeline_id/cancel", s.cancelPipeline},
		{"GET /projects/:id/hooks", s.listHooks},
		{"GET /projects/:id/hooks/:hook_id", s.getHook},
		{"POST /projects/:id/hooks", s.addHook},
		{"PUT /projects/:id/hooks/:hook_id", s.editHook},
		{"DELETE /projects/:id/hooks/:hook_id", s.deleteHook},
		{"POST /projects/:id/hooks/:hook_id/test/:trigger", s.testHook},
		{"GET /groups/:id/hooks", s.listGroupHooks},
		{"GET /groups/:id/hooks/:hook_id", s.getGroupHook},
		{"POST /groups/:id/hooks", s.addGroupHook},
		{"PUT /groups/:id/hooks/:hook_id", s.editGroupHook},
		{"DELETE /groups/:id/hooks/:hook_id", s.deleteGroupHook},
		{"POST /groups/:id/hooks/:hook_id/test/:trigger", s.testGroupHook},
		{"GET /projects/:id/members/all/:user_id", s.getMemberAll},
		{"POST /projects/:id/statuses/:sha", s.postStatus},
		{"GET /projects/:id/repository/commits/:sha/statuses", s.listStatuses},
		{"GET /projects/:id/registry/repositories", s.listContainerRepositories},
		{"GET /projects/:id/registry/repositories/:repository_id/tags", s.listContainerTags},
		{"GET /projects/:id/registry/repositories/:repository_id/tags/:tag_name", s.getContainerTag},
		{"DELETE /projects/:id/registry/repositories/:repository_id/tags/:tag_name", s.deleteContainerTag},
	} {
		mux.Handle(muxPattern(rt.name), s.middleware(rt.name, rt.handler))
	}
	// Refs, commits, merge requests and notes (tags.go, branches.go,
	// commits.go, mergerequests.go, notes.go).
	for _, rt := range []route{
		{"GET /projects/:id/repository/tags", s.listTags},
		{"POST /projects/:id/repository/tags", s.postTag},
		{"GET /projects/:id/repository/tags/:tag_name", s.getTag},
		{"DELETE /projects/:id/repository/tags/:tag_name", s.deleteTag},
		{"GET /projects/:id/repository/branches", s.listBranches},
		{"POST /projects/:id/repository/branches", s.postBranch},
		{"GET /projects/:id/repository/branches/:branch", s.getBranch},
		{"DELETE /projects/:id/repository/branches/:branch", s.deleteBranch},
		{"GET /projects/:id/protected_branches", s.listProtectedBranches},
		{"POST /projects/:id/repository/commits", s.createCommit},
		{"GET /projects/:id/merge_requests", s.listMRs},
		{"POST /projects/:id/merge_requests", s.createMR},
		{"GET /projects/:id/merge_requests/:merge_request_iid", s.getMR},
		{"PUT /projects/:id/merge_requests/:merge_request_iid", s.updateMR},
		{"PUT /projects/:id/merge_requests/:merge_request_iid/merge", s.mergeMR},
		{"GET /projects/:id/merge_requests/:merge_request_iid/pipelines", s.listMRPipelines},
		{"GET /projects/:id/merge_requests/:merge_request_iid/notes", s.listNotes},
		{"POST /projects/:id/merge_requests/:merge_request_iid/notes", s.postNote},
		{"GET /projects/:id/merge_requests/:merge_request_iid/notes/:note_id", s.getNote},
		{"PUT /projects/:id/merge_requests/:merge_request_iid/notes/:note_id", s.putNote},
	} {
		mux.Handle(muxPattern(rt.name), s.middleware(rt.name, rt.handler))
	}
	mux.Handle(GraphQLEndpoint, s.middleware(GraphQLEndpoint, s.graphQL))
	// GitLab's runner-facing API: authenticated by runner and job tokens.
	for _, rt := range []route{
		{"POST /jobs/request", s.requestJob},
		{"PATCH /jobs/:job_id/trace", s.appendTrace},
		{"PUT /jobs/:job_id", s.updateJob},
	} {
		// Counted and faulted as the REST API, authenticated by the runner
		// or job token each endpoint checks, not the API token.
		mux.Handle(muxPattern(rt.name), s.served(rt.name, rt.handler))
	}
	// GitLab's OAuth 2 provider and its sign-in page (oauth.go): not under
	// /api/v4, authenticated by what each endpoint checks.
	for _, rt := range []route{
		{"GET /oauth/authorize", s.oauthAuthorize},
		{"POST /oauth/token", s.oauthToken},
		{"POST /oauth/revoke", s.oauthRevoke},
		{"GET /users/sign_in", s.signInPage},
		{"POST /users/sign_in", s.signIn},
	} {
		method, path, _ := strings.Cut(rt.name, " ")
		mux.Handle(method+" "+path, s.served(rt.name, rt.handler))
	}
	api := s.middleware("unknown", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "404 Not Found"})
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") && s.serveGit(w, r) {
			return
		}
		api.ServeHTTP(w, r)
	}))
	return mux
}

// muxPattern turns "GET /projects/:id" into "GET /api/v4/projects/{id}".
func muxPattern(name string) string {
	method, path, _ := strings.Cut(name, " ")
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, ":") {
			segs[i] = "{" + seg[1:] + "}"
		}
	}
	return method + " /api/v4" + strings.Join(segs, "/")
}

// served applies, in order: latency, counting, injected faults; then h.
// GitLab's rate limiter also answers before authentication.
func (s *Server) served(name string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := s.stats.begin(name)
		defer done()
		if s.onRequest != nil {
			s.onRequest(name)
		}
		if !sleepCtx(r.Context(), time.Duration(s.latency.Load())) {
			return
		}
		if f, ok := s.stats.takeFault(name); ok {
			s.writeFault(w, f)
			return
		}
		h(w, r)
	})
}

// middleware is served with the API token's authentication before h.
func (s *Server) middleware(name string, h http.HandlerFunc) http.Handler {
	return s.served(name, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case name == GraphQLEndpoint && requestToken(r) == "":
			// GraphQL without a token is anonymous, not refused.
		case name == GraphQLEndpoint && !s.authorized(r):
			graphQLErrors(w, http.StatusUnauthorized, "Invalid token")
			return
		case name == GraphQLEndpoint:
		default:
			// The caller, and what it may do on this route (users.go).
			c, ok := s.authenticate(w, r, name)
			if !ok {
				return
			}
			r = withCaller(r, c)
		}
		h(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	tok := requestToken(r)
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.Token)) == 1
}

// requestToken is the token a request carries, if any.
func requestToken(r *http.Request) string {
	tok := r.Header.Get("PRIVATE-TOKEN")
	if tok == "" {
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			tok = b
		}
	}
	if tok == "" {
		tok = r.URL.Query().Get("private_token")
	}
	return tok
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
