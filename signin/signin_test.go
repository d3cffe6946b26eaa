package signin_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/signin"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// world is a fake GitLab with an OAuth application, a store, and depsd's
// sign-in in front of a page that says who asks and what they see.
type world struct {
	t     *testing.T
	clock *clock
	fake  *gitlabtest.Server
	store *store.Store
	app   gitlabtest.OAuthApp
	ann   gitlabtest.User
	admin *gitlab.Client
	depsd *httptest.Server
	svc   *signin.Service
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, clock: &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}}
	w.fake = gitlabtest.New(gitlabtest.Options{Now: w.clock.Now})
	t.Cleanup(w.fake.Close)
	for _, p := range []string{"g/mine", "g/public", "h/secret"} {
		if _, err := w.fake.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": "FROM scratch\n"}}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if w.ann, err = w.fake.AddUser("ann"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		w.fake.AddMember("g/mine", "ann", gitlabtest.AccessDeveloper),
		w.fake.SetVisibility("g/public", gitlabtest.VisibilityPublic),
		w.fake.SetBrowserUser("ann"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.store, err = store.Open(t.Context(), storetest.State(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.store.Close() })
	if w.admin, err = gitlab.New(gitlab.Config{BaseURL: w.fake.URL, Token: w.fake.Token, RequestsPerMinute: -1}); err != nil {
		t.Fatal(err)
	}
	// The redirect URI names depsd's address: listen first.
	w.depsd = httptest.NewUnstartedServer(nil)
	t.Cleanup(w.depsd.Close)
	depsdURL := "http://" + w.depsd.Listener.Addr().String()
	if w.app, err = w.fake.AddOAuthApp(depsdURL+"/auth/callback", "read_api"); err != nil {
		t.Fatal(err)
	}
	w.svc = w.service(depsdURL)
	w.depsd.Config.Handler = w.handler(w.svc)
	w.depsd.Start()
	return w
}

func (w *world) service(externalURL string) *signin.Service {
	w.t.Helper()
	svc, err := signin.New(w.t.Context(), signin.Config{GitLab: w.admin, ClientID: w.app.ClientID, ClientSecret: w.app.Secret,
		ExternalURL: externalURL, SessionLifetime: 12 * time.Hour, Store: w.store, Now: w.clock.Now})
	if err != nil {
		w.t.Fatal(err)
	}
	return svc
}

// handler answers "user paths" for the person, POST /act checks CSRF,
// and serves /static/ to anyone.
func (w *world) handler(svc *signin.Service) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/static/", func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "css") })
	mux.HandleFunc("POST /act", func(rw http.ResponseWriter, r *http.Request) {
		if !svc.CheckCSRF(r, signin.PersonFrom(r.Context())) {
			http.Error(rw, "csrf", http.StatusForbidden)
			return
		}
		fmt.Fprint(rw, "acted")
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		p := signin.PersonFrom(r.Context())
		var seen []string
		for _, path := range []string{"g/mine", "g/public", "h/secret", "g/new"} {
			if p.Visible().Sees(path) {
				seen = append(seen, path)
			}
		}
		fmt.Fprintf(rw, "%s %s csrf=%s", p.Username, strings.Join(seen, ","), p.CSRF())
	})
	return svc.Handler(mux, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/static/") })
}

// browser is a cookie-keeping client that follows redirects.
func (w *world) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

func (w *world) get(c *http.Client, path string) (int, string) {
	w.t.Helper()
	resp, err := c.Get(w.depsd.URL + path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signIn goes through GitLab's sign-in and comes back to path.
func (w *world) signIn(c *http.Client, path string) string {
	w.t.Helper()
	code, body := w.get(c, "/auth/login?return="+url.QueryEscape(path))
	if code != http.StatusOK {
		w.t.Fatalf("sign-in round trip: %d %s", code, body)
	}
	return body
}

func (w *world) sessionCookie(c *http.Client) *http.Cookie {
	u, _ := url.Parse(w.depsd.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == signin.SessionCookie {
			return ck
		}
	}
	w.t.Fatal("no session cookie")
	return nil
}

// withCookie asks path with only this session cookie (a replayed one).
func (w *world) withCookie(value, path string) int {
	w.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, w.depsd.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: signin.SessionCookie, Value: value})
	resp, err := noRedirect.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// noRedirect shows the sign-in's redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// refused is the answer to a page without a valid session: to the
// sign-in page.
const refused = http.StatusSeeOther

func csrfOf(body string) string {
	_, c, _ := strings.Cut(body, "csrf=")
	return c
}

// TestSignInRoundTrip: an outsider gets the sign-in page and nothing
// else (the static assets aside); the round trip through GitLab signs ann
// in and brings her back to the page she asked for, which shows her only
// the projects GitLab lists for her token.
func TestSignInRoundTrip(t *testing.T) {
	w := newWorld(t)
	c := w.browser()
	code, body := w.get(c, "/graph?focus=g/mine")
	if code != http.StatusOK || !strings.Contains(body, "Sign in with GitLab") || strings.Contains(body, "g/mine ") {
		t.Fatalf("an outsider got %d %q, want the sign-in page", code, body)
	}
	if code, _ := w.get(c, "/static/style.css"); code != http.StatusOK {
		t.Errorf("static asset for an outsider: %d", code)
	}
	resp, err := c.Get(w.depsd.URL + "/api/v1/chains")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("API for an outsider: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body = w.signIn(c, "/graph?focus=g/mine")
	if !strings.HasPrefix(body, "ann g/mine,g/public csrf=") {
		t.Fatalf("after sign-in: %q", body)
	}
	ck := w.sessionCookie(c)
	if !ck.HttpOnly && ck.Raw != "" { // the jar drops attributes; checked on the header below
		t.Error("session cookie not HttpOnly")
	}
	// What GitLab lists is cached; ?refresh reads it again.
	if _, err := w.fake.AddProject(gitlabtest.Project{Path: "g/new", Files: map[string]string{"Containerfile": "FROM scratch\n"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.fake.AddMember("g/new", "ann", gitlabtest.AccessReporter); err != nil {
		t.Fatal(err)
	}
	if _, body := w.get(c, "/"); strings.Contains(body, "g/new") {
		t.Errorf("cached visibility changed without a refresh: %q", body)
	}
	if _, body := w.get(c, "/?refresh"); !strings.Contains(body, "g/new") {
		t.Errorf("after ?refresh: %q, want g/new", body)
	}
}

// TestSessionCookieAttributes: HttpOnly, SameSite=Lax, Secure when depsd
// is reached over https.
func TestSessionCookieAttributes(t *testing.T) {
	w := newWorld(t)
	c := w.browser()
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/x" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Get(w.depsd.URL + "/auth/login?return=/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var set string
	for _, h := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(h, signin.SessionCookie+"=") {
			set = h
		}
	}
	if !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Lax") || strings.Contains(set, "Secure") {
		t.Errorf("session cookie over http: %q", set)
	}
	if resp.Header.Get("Location") != "/x" {
		t.Errorf("back to %q, want /x", resp.Header.Get("Location"))
	}
	// Over https (ui.url), the cookies are Secure.
	secure := w.service("https://depsd.example.com")
	rec := httptest.NewRecorder()
	w.handler(secure).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
	if h := rec.Header().Get("Set-Cookie"); !strings.Contains(h, "Secure") {
		t.Errorf("sign-in cookie over https: %q", h)
	}
}

// TestReplayedForgedAndExpiredSessionsAreRefused: a cookie after sign-out
// (replayed), one whose signature was changed or made with another key
// (forged), and one past the session's lifetime are all refused.
func TestReplayedForgedAndExpiredSessionsAreRefused(t *testing.T) {
	w := newWorld(t)
	c := w.browser()
	body := w.signIn(c, "/")
	old := w.sessionCookie(c).Value
	if code := w.withCookie(old, "/"); code != http.StatusOK {
		t.Fatalf("the cookie itself: %d", code)
	}
	value, sig, _ := strings.Cut(old, ".")
	for name, forged := range map[string]string{
		"changed signature": value + "." + strings.Repeat("A", len(sig)),
		"changed id":        "A" + value[1:] + "." + sig,
		"no signature":      value,
		"garbage":           "x.y.z",
	} {
		if code := w.withCookie(forged, "/"); code != refused {
			t.Errorf("%s: %d, want the sign-in page", name, code)
		}
	}
	// Sign-out needs the CSRF token; then the cookie is worth nothing.
	resp, err := c.PostForm(w.depsd.URL+"/auth/logout", url.Values{"csrf": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %d, want 403", resp.StatusCode)
	}
	resp, err = c.PostForm(w.depsd.URL+"/auth/logout", url.Values{"csrf": {csrfOf(body)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := w.withCookie(old, "/"); code != refused {
		t.Errorf("replayed cookie after sign-out: %d, want the sign-in page", code)
	}
	// Expiry: a new session, the clock past its lifetime.
	c = w.browser()
	w.signIn(c, "/")
	fresh := w.sessionCookie(c).Value
	w.clock.Advance(12*time.Hour + time.Second)
	if code := w.withCookie(fresh, "/"); code != refused {
		t.Errorf("expired session: %d, want the sign-in page", code)
	}
	if n, err := w.svc.PruneSessions(t.Context()); err != nil || n != 1 {
		t.Errorf("pruned %d sessions (%v), want 1", n, err)
	}
}

// TestTokenRefreshedWhenItExpires: past the access token's 2 hours, the
// session goes on with a token refreshed by its refresh token (GitLab
// revokes the old one); the store holds the new one sealed, never the
// plain token.
func TestTokenRefreshedWhenItExpires(t *testing.T) {
	w := newWorld(t)
	c := w.browser()
	w.signIn(c, "/")
	w.clock.Advance(2*time.Hour + time.Minute)
	if code, body := w.get(c, "/?refresh"); code != http.StatusOK || !strings.HasPrefix(body, "ann g/mine") {
		t.Fatalf("after the token expired: %d %q", code, body)
	}
	// The store holds the token sealed, and the session by the hash of
	// the cookie's id only.
	raw, _, _ := strings.Cut(w.sessionCookie(c).Value, ".")
	id, _ := base64.RawURLEncoding.DecodeString(raw)
	sum := sha256.Sum256(id)
	se, ok, err := w.store.Session(t.Context(), hex.EncodeToString(sum[:]))
	if err != nil || !ok || se.Username != "ann" {
		t.Fatalf("stored session: %+v %v %v", se, ok, err)
	}
	if strings.Contains(string(se.Token), "token") || strings.Contains(string(se.Token), "expiry") {
		t.Errorf("the stored token is readable: %q", se.Token)
	}
	if _, ok, _ := w.store.Session(t.Context(), string(id)); ok {
		t.Error("the store finds a session by the cookie's own id")
	}
	// A second replica (another Service on the same store) reads the
	// refreshed token: no second refresh, which GitLab would refuse.
	other := httptest.NewServer(w.handler(w.service(w.depsd.URL)))
	defer other.Close()
	req, _ := http.NewRequest(http.MethodGet, other.URL+"/?refresh", nil)
	req.AddCookie(w.sessionCookie(c))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the other replica: %d", resp.StatusCode)
	}
}

// TestSessionsSurviveAReplica: two replicas on one store (PostgreSQL
// with DEPSD_TEST_STORE=postgres): a session made by one is good on the
// other after the first is gone, and a sign-out on one ends it on both.
func TestSessionsSurviveAReplica(t *testing.T) {
	w := newWorld(t)
	c := w.browser()
	body := w.signIn(c, "/")
	cookie := w.sessionCookie(c)
	second := httptest.NewServer(w.handler(w.service(w.depsd.URL)))
	defer second.Close()
	w.depsd.Close() // the replica that signed ann in dies
	ask := func() int {
		req, _ := http.NewRequest(http.MethodGet, second.URL+"/", nil)
		req.AddCookie(cookie)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ask(); code != http.StatusOK {
		t.Fatalf("session on the other replica: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, second.URL+"/auth/logout", strings.NewReader(url.Values{"csrf": {csrfOf(body)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := ask(); code != refused {
		t.Errorf("after sign-out: %d, want the sign-in page", code)
	}
}

// TestCSRF: an action of a session needs its CSRF token; a bearer
// request needs none.
func TestCSRF(t *testing.T) {
	w := newWorld(t)
	c := w.browser()
	body := w.signIn(c, "/")
	for _, tt := range []struct {
		name  string
		token string
		want  int
	}{
		{"none", "", http.StatusForbidden},
		{"wrong", "x" + csrfOf(body), http.StatusForbidden},
		{"right", csrfOf(body), http.StatusOK},
	} {
		resp, err := c.PostForm(w.depsd.URL+"/act", url.Values{"csrf": {tt.token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s CSRF token: %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, w.depsd.URL+"/act", nil)
	req.Header.Set("Authorization", "Bearer "+w.ann.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("bearer action: %d, want 200", resp.StatusCode)
	}
}

// TestBearerToken: a personal access token is a person on the API; a
// wrong one gets 401 JSON.
func TestBearerToken(t *testing.T) {
	w := newWorld(t)
	for _, tt := range []struct {
		header string
		want   int
		body   string
	}{
		{"Bearer " + w.ann.Token, http.StatusOK, "ann g/mine,g/public"},
		{"Bearer glpat-wrong", http.StatusUnauthorized, `"error"`},
		{"Basic abc", http.StatusUnauthorized, `"error"`},
	} {
		req, _ := http.NewRequest(http.MethodGet, w.depsd.URL+"/api/v1/chains", nil)
		req.Header.Set("Authorization", tt.header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.body) {
			t.Errorf("%s: %d %s", strings.Fields(tt.header)[0], resp.StatusCode, b)
		}
		if tt.want == http.StatusUnauthorized {
			var m map[string]string
			if json.Unmarshal(b, &m) != nil {
				t.Errorf("401 body is not JSON: %s", b)
			}
		}
	}
}

// TestRoleIsAskedAtTheMomentOfTheAction: Person.Role reads GitLab now.
func TestRoleIsAskedAtTheMomentOfTheAction(t *testing.T) {
	w := newWorld(t)
	client, err := w.admin.WithToken(w.ann.Token, false)
	if err != nil {
		t.Fatal(err)
	}
	p := signin.NewPerson(w.ann.ID, "ann", client, nil)
	mine, _ := w.fake.Project("g/mine")
	ctx := context.Background()
	if r, err := p.Role(ctx, mine.ID); err != nil || r != gitlab.Developer {
		t.Fatalf("role on g/mine: %v %v", r, err)
	}
	if err := w.fake.AddMember("g/mine", "ann", gitlabtest.AccessReporter); err != nil {
		t.Fatal(err)
	}
	if r, err := p.Role(ctx, mine.ID); err != nil || r != gitlab.Reporter {
		t.Errorf("role after a demotion: %v %v, want Reporter", r, err)
	}
}
