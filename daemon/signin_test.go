package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store/pgtest"
)

// signinWorld is depsd serve with sign-in on, over a fake GitLab where
// g/base → g/app and g/base → h/secret; ann is a Developer of group g,
// bob a Reporter of it, and neither may read h.
type signinWorld struct {
	t        *testing.T
	srv      *gitlabtest.Server
	d        *Daemon
	url      string
	ann, bob gitlabtest.User
}

func newSigninWorld(t *testing.T) *signinWorld {
	t.Helper()
	srv := testGitLab(t, gitlabtest.Options{Pipelines: gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}},
		map[string]string{
			"g/base":   "FROM debian:12\n",
			"g/app":    "FROM registry.example.com/g/base:latest\n",
			"h/secret": "FROM registry.example.com/g/base:latest\n",
		})
	if err := srv.SetPipelineBehavior("g/app", gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}
	w := &signinWorld{t: t, srv: srv}
	var err error
	if w.ann, err = srv.AddUser("ann"); err != nil {
		t.Fatal(err)
	}
	if w.bob, err = srv.AddUser("bob"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{srv.AddMember("g", "ann", gitlabtest.AccessDeveloper), srv.AddMember("g", "bob", gitlabtest.AccessReporter)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The redirect URI names depsd's address: take a free port first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	w.url = "http://" + addr
	app, err := srv.AddOAuthApp(w.url+"/auth/callback", "read_api")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, srv)
	cfg.Scope.Groups = []string{"g", "h"}
	cfg.UI.URL, cfg.UI.OAuth.ClientID, cfg.UI.OAuth.ClientSecret = w.url, app.ClientID, app.Secret
	listening := make(chan struct{})
	w.d, _ = runDaemon(t, Options{Config: cfg, GitLab: testClient(t, srv), Listen: addr,
		PollInterval: 20 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond,
		Listening: func(string) { close(listening) }})
	<-listening
	eventually(t, "the daemon to be ready", func() bool { code, _ := w.do("GET", "/readyz", "", nil); return code == 200 })
	return w
}

// do sends a request with a bearer token ("" for none) and a JSON body.
func (w *signinWorld) do(method, path, token string, body any) (int, string) {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, w.url+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (w *signinWorld) chain(id int64) chain.ChainView {
	w.t.Helper()
	v, err := w.d.Engine().Chain(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

// TestSignedInPeopleSeeTheirProjectsAndDevelopersAct: an outsider gets
// the sign-in page (or 401 from the API) and nothing else, the metrics
// and health checks keep their own rules; ann sees her projects only
// (h/secret is hidden in the chain it is a member of, absent from the
// graph, the SVG and the chains); a Reporter cannot act, a Developer can
// (a rebuild, then a retry that unblocks the chain); a session's action
// without its CSRF token is refused; every action and refusal is in the
// audit log.
func TestSignedInPeopleSeeTheirProjectsAndDevelopersAct(t *testing.T) {
	w := newSigninWorld(t)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/", 200, "Sign in with GitLab"},
		{"/graph", 200, "Sign in with GitLab"},
		{"/projects/g/base", 200, "Sign in with GitLab"},
		{"/api/v1/chains", 401, `"error"`},
		{"/api/v1/graph", 401, `"error"`},
		{"/static/style.css", 200, ""},
		{"/healthz", 200, "ok"},
		{"/metrics", 200, "depsd_"},
	} {
		code, body := w.do("GET", tc.path, "", nil)
		if code != tc.code || !strings.Contains(body, tc.want) || (strings.Contains(body, "Sign in") && strings.Contains(body, "g/base<")) {
			t.Errorf("outsider GET %s: %d %.200s", tc.path, code, body)
		}
	}
	if code, _ := w.do("POST", "/api/v1/rebuild", "", map[string]string{"project": "g/base"}); code != 401 {
		t.Errorf("outsider rebuild: %d, want 401", code)
	}

	// bob, a Reporter, may look but not act.
	if code, body := w.do("POST", "/api/v1/rebuild", w.bob.Token, map[string]string{"project": "g/base"}); code != 403 || !strings.Contains(body, "Reporter") {
		t.Errorf("Reporter's rebuild: %d %s, want 403", code, body)
	}
	if code, _ := w.do("POST", "/api/v1/rebuild", w.ann.Token, map[string]string{"project": "h/secret"}); code != 404 {
		t.Errorf("rebuild of a project ann cannot see: %d, want 404", code)
	}
	code, body := w.do("POST", "/api/v1/rebuild", w.ann.Token, map[string]string{"project": "g/base"})
	if code != 200 {
		t.Fatalf("Developer's rebuild: %d %s", code, body)
	}
	var done struct {
		ChainID int64 `json:"chain_id"`
	}
	json.Unmarshal([]byte(body), &done)
	eventually(t, "g/app to fail and block the chain", func() bool { return w.chain(done.ChainID).State == chain.Blocked })

	// ann sees her projects only, everywhere.
	for _, path := range []string{"/api/v1/chains", fmt.Sprintf("/api/v1/chains/%d", done.ChainID), "/api/v1/graph", "/api/v1/freshness",
		"/api/v1/status", "/api/v1/audit", "/graph.svg", "/graph", "/", fmt.Sprintf("/chains/%d", done.ChainID), "/health", "/freshness",
		"/graph/projects", "/projects/g/base"} {
		code, body := w.do("GET", path, w.ann.Token, nil)
		if code != 200 || strings.Contains(body, "secret") {
			t.Errorf("ann GET %s: %d, shows h/secret: %v", path, code, strings.Contains(body, "secret"))
		}
	}
	_, body = w.do("GET", fmt.Sprintf("/api/v1/chains/%d", done.ChainID), w.ann.Token, nil)
	var v chain.ChainView
	json.Unmarshal([]byte(body), &v)
	var got []string
	for _, m := range v.Members {
		got = append(got, fmt.Sprintf("%s=%s/%v", m.Project, m.State, m.Hidden))
	}
	if strings.Join(got, " ") != "g/app=failed/false g/base=success/false hidden-1=success/true" {
		t.Errorf("ann's chain: %v", got)
	}
	if code, _ := w.do("GET", "/projects/h/secret", w.ann.Token, nil); code != 404 {
		t.Errorf("ann GET /projects/h/secret: %d, want 404", code)
	}

	// A session's action needs its CSRF token.
	if err := w.srv.SetBrowserUser("ann"); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(w.url + "/auth/login?return=/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `id="viewer-name">ann<`) {
		t.Fatalf("after sign-in: %d %.300s", resp.StatusCode, page)
	}
	resp, err = browser.PostForm(w.url+fmt.Sprintf("/chains/%d/retry", done.ChainID), url.Values{"member": {"g/app"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("retry without the CSRF token: %d, want 403", resp.StatusCode)
	}

	// bob cannot retry; ann can, and the chain goes on.
	retry := fmt.Sprintf("/api/v1/chains/%d/retry", done.ChainID)
	if code, _ := w.do("POST", retry, w.bob.Token, map[string]string{"member": "g/app"}); code != 403 {
		t.Errorf("Reporter's retry: %d, want 403", code)
	}
	if err := w.srv.SetPipelineBehavior("g/app", gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}); err != nil {
		t.Fatal(err)
	}
	if code, body := w.do("POST", retry, w.ann.Token, map[string]string{"member": "g/app"}); code != 200 {
		t.Fatalf("Developer's retry: %d %s", code, body)
	}
	eventually(t, "the retried chain to finish", func() bool { return w.chain(done.ChainID).State == chain.Finished })
	if n := len(w.srv.Pipelines("g/app")); n != 2 {
		t.Errorf("g/app built %d times, want 2", n)
	}
	log, err := w.d.Engine().Audit(context.Background(), chain.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range log {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", e.Actor, e.Action, e.Target, e.Outcome))
	}
	want := []string{
		"ann retry g/app done",
		"bob retry g/app refused: Reporter on g/app",
		"ann retry g/app refused: no valid CSRF token",
		"ann rebuild g/base done",
		"bob rebuild g/base refused: Reporter on g/base",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if log[0].Address != "127.0.0.1" {
		t.Errorf("audit address %q", log[0].Address)
	}
}

// TestSessionSurvivesItsReplica: two depsd serve replicas on one
// PostgreSQL database; ann signs in on the first, which then stops, and
// her session cookie is good on the second; her sign-out there ends it.
func TestSessionSurvivesItsReplica(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian:12\n"})
	if _, err := srv.AddUser("ann"); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddMember("g", "ann", gitlabtest.AccessReporter); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBrowserUser("ann"); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, 2)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	// One OAuth application, one public address (a load balancer in
	// front of both); the browser reaches each replica directly here.
	app, err := srv.AddOAuthApp("http://"+addrs[0]+"/auth/callback", "read_api")
	if err != nil {
		t.Fatal(err)
	}
	state := pgtest.Database(t)
	start := func(addr string) (stop func()) {
		cfg := testConfig(t, srv)
		cfg.State = state
		cfg.UI.URL, cfg.UI.OAuth.ClientID, cfg.UI.OAuth.ClientSecret = "http://"+addrs[0], app.ClientID, app.Secret
		ctx, cancel := context.WithCancel(context.Background())
		d, err := New(ctx, Options{Config: cfg, GitLab: testClient(t, srv), Listen: addr, PollInterval: 50 * time.Millisecond})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		var once bool
		stop = func() {
			if once {
				return
			}
			once = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		t.Cleanup(stop)
		eventually(t, "replica "+addr+" to be ready", func() bool {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		return stop
	}
	stopFirst := start(addrs[0])
	start(addrs[1])

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get("http://" + addrs[0] + "/auth/login?return=/graph")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u, _ := url.Parse("http://" + addrs[0])
	var cookie *http.Cookie
	for _, c := range jar.Cookies(u) {
		if c.Name == "depsd_session" {
			cookie = c
		}
	}
	if resp.StatusCode != 200 || cookie == nil {
		t.Fatalf("sign-in on the first replica: %d, cookie %v", resp.StatusCode, cookie != nil)
	}
	stopFirst()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ask := func(method, path string, body url.Values) (int, string) {
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(body.Encode())
		}
		req, _ := http.NewRequest(method, "http://"+addrs[1]+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, page := ask("GET", "/", nil)
	if code != 200 || !strings.Contains(page, `id="viewer-name">ann<`) {
		t.Fatalf("the session on the second replica: %d %.300s", code, page)
	}
	_, csrf, _ := strings.Cut(page, `name="csrf" value="`)
	csrf, _, _ = strings.Cut(csrf, `"`)
	if code, _ := ask("POST", "/auth/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	if code, _ := ask("GET", "/", nil); code != http.StatusSeeOther {
		t.Errorf("the cookie after sign-out: %d, want a redirect to the sign-in page", code)
	}
}
