// Package signin signs people in to depsd's dashboard and API with their
// GitLab account, and says who asks and what they may see:
//
//   - the OAuth 2 authorization-code flow with PKCE (S256) against the
//     GitLab depsd works with, scope read_api, so that depsd reads what a
//     person may see with the person's own token (/auth/login,
//     /auth/callback);
//   - sessions: an HttpOnly, SameSite=Lax cookie (Secure over TLS) holding
//     a random id signed with a key kept in the store, so that every
//     replica accepts it; the store keeps the id's hash, the person and
//     their OAuth token sealed (cookie.go); the token is refreshed with
//     its refresh token when it expires; /auth/logout deletes the session
//     (its cookie is then refused) and revokes the token; a session ends
//     after Config.SessionLifetime whatever the token says;
//   - a personal access token in Authorization: Bearer, for the API;
//   - a CSRF token per session for every action (CheckCSRF);
//   - what each person may see: the projects GitLab lists for their token
//     (public, internal and their memberships), cached per person for
//     Config.VisibilityTTL and read again on demand (visibility.go);
//   - their role on a project, asked of GitLab at the moment of an
//     action, never from a cache (Person.Role).
//
// What it holds: who asks the dashboard and the API:
// sign-in with GitLab (OAuth 2 code flow with PKCE, scope `read_api`),
// sessions (a cookie signed with a key in the store, the person's token
// sealed in the store and refreshed), personal access tokens as
// `Authorization: Bearer`, CSRF tokens, what each person may see (GitLab's
// list for their token, cached a few minutes) and their role on a project
// at the moment of an action
package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"gitlab.com/depsd/depsd/gitlab"
)

// Cookie names.
const (
	SessionCookie = "depsd_session"
	flowCookie    = "depsd_signin"
)

// Scope is the OAuth scope depsd asks for: reading the API as the person.
const Scope = "read_api"

// flowLifetime bounds a sign-in round trip through GitLab.
const flowLifetime = 10 * time.Minute

// Config is what the sign-in needs.
type Config struct {
	// GitLab is the server's client (its instance URL, connections and
	// settings); each person gets a client of their own token from it.
	GitLab *gitlab.Client
	// ClientID and ClientSecret are the OAuth application's (registered
	// on GitLab with the redirect URI ExternalURL + "/auth/callback" and
	// the scope read_api).
	ClientID, ClientSecret string
	// ExternalURL is depsd's address as browsers reach it (ui.url), with
	// no trailing slash: the redirect URI is built from it. Its scheme
	// https makes the cookies Secure.
	ExternalURL string
	// SessionLifetime ends a session after this long. Default 12 h.
	SessionLifetime time.Duration
	// VisibilityTTL is how long what a person may see is reused before
	// GitLab is asked again. Default 5 min.
	VisibilityTTL time.Duration
	Store         Store
	Now           func() time.Time
	Logger        *slog.Logger
}

// Service signs people in and authenticates their requests. Build it with
// New; its methods are safe for concurrent use.
type Service struct {
	cfg    Config
	oauth  oauth2.Config
	sign   signer
	seal   sealer
	secure bool
	log    *slog.Logger
	vis    visibilityCache

	mu      sync.Mutex
	clients map[string]*gitlab.Client // by access token: a person's client
	bearers map[string]bearerEntry    // by personal access token's hash
	refresh sync.Mutex                // one token refresh at a time in this process
}

type bearerEntry struct {
	user gitlab.User
	at   time.Time
}

// bearerTTL is how long a personal access token's user is reused.
const bearerTTL = time.Minute

// New reads (or makes) the cookie key from the store and returns the
// service.
func New(ctx context.Context, cfg Config) (*Service, error) {
	switch {
	case cfg.GitLab == nil || cfg.Store == nil:
		return nil, errors.New("signin: GitLab and Store are required")
	case cfg.ClientID == "" || cfg.ClientSecret == "":
		return nil, errors.New("signin: the OAuth application's client id and secret are required")
	}
	u, err := url.Parse(cfg.ExternalURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("signin: external URL %q: want http(s)://host[:port]", cfg.ExternalURL)
	}
	cfg.ExternalURL = strings.TrimSuffix(cfg.ExternalURL, "/")
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = 12 * time.Hour
	}
	if cfg.VisibilityTTL <= 0 {
		cfg.VisibilityTTL = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	key, err := cfg.Store.SessionKey(ctx, func() ([]byte, error) { return []byte(randomID(32)), nil })
	if err != nil {
		return nil, fmt.Errorf("signin: %w", err)
	}
	seal, err := newSealer(cfg.ClientSecret)
	if err != nil {
		return nil, fmt.Errorf("signin: %w", err)
	}
	base := strings.TrimSuffix(cfg.GitLab.BaseURL(), "/")
	s := &Service{
		cfg: cfg,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
			Endpoint: oauth2.Endpoint{AuthURL: base + "/oauth/authorize", TokenURL: base + "/oauth/token",
				AuthStyle: oauth2.AuthStyleInParams},
			RedirectURL: cfg.ExternalURL + "/auth/callback",
			Scopes:      []string{Scope},
		},
		sign: signer{key: key}, seal: seal, secure: u.Scheme == "https",
		log:     cfg.Logger.With("component", "signin"),
		clients: map[string]*gitlab.Client{}, bearers: map[string]bearerEntry{},
	}
	s.vis.entries = map[int64]*visibilityEntry{}
	return s, nil
}

// RedirectURI is the redirect URI to register with the OAuth application.
func (s *Service) RedirectURI() string { return s.oauth.RedirectURL }

// Person is who asks: signed in with a session, or by a personal access
// token (Bearer).
type Person struct {
	ID       int64
	Username string
	// Bearer: the request carried a personal access token; there is no
	// session, and no CSRF token applies.
	Bearer bool
	// sessionID is the stored id of the session (Bearer: "").
	sessionID string
	csrf      string
	client    *gitlab.Client
	visible   *Visible
}

// CSRF is the token every action form of the person's session carries.
func (p *Person) CSRF() string { return p.csrf }

// Visible is what the person may see (as GitLab listed it at Visible.At).
func (p *Person) Visible() *Visible { return p.visible }

// Role is the person's access level on a project, asked of GitLab now
// with their own token (inherited memberships included): whether they may
// act is decided on it, never on a cache.
func (p *Person) Role(ctx context.Context, projectID int64) (gitlab.AccessLevel, error) {
	return p.client.ProjectMemberAccess(ctx, projectID, p.ID)
}

// personKey is the context key of the request's Person.
type personKey struct{}

// PersonFrom returns the person Handler authenticated for the request, or
// nil (sign-in off, or a public route).
func PersonFrom(ctx context.Context) *Person {
	p, _ := ctx.Value(personKey{}).(*Person)
	return p
}

// WithPerson returns ctx carrying p (what Handler does; tests).
func WithPerson(ctx context.Context, p *Person) context.Context {
	return context.WithValue(ctx, personKey{}, p)
}

// NewPerson is a person as tests build one: who, the token's client and
// what they see.
func NewPerson(id int64, username string, client *gitlab.Client, visible *Visible) *Person {
	return &Person{ID: id, Username: username, client: client, visible: visible, Bearer: true}
}

// Handler serves the sign-in's routes (/auth/...) and authenticates every
// other request before next sees it: a session cookie, or a personal
// access token in Authorization: Bearer. A request without either gets
// the sign-in page (JSON 401 under /api/), except public ones (the
// static assets) which next serves to anyone; a browser's GET is sent to
// the sign-in page (/auth/signin). ?refresh on any page reads
// what the person may see again.
func (s *Service) Handler(next http.Handler, public func(*http.Request) bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /auth/login", s.login)
	mux.HandleFunc("GET /auth/callback", s.callback)
	mux.HandleFunc("POST /auth/logout", s.logout)
	mux.HandleFunc("GET /auth/signin", func(w http.ResponseWriter, r *http.Request) {
		s.signInPage(w, r, http.StatusOK, "")
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if public != nil && public(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		if _, refresh := r.URL.Query()["refresh"]; refresh || p.visible == nil {
			v, err := s.visibleTo(r.Context(), p, refresh)
			if err != nil {
				s.log.Warn("read what a person may see", "user", p.Username, "err", err)
				s.refuse(w, r, fmt.Errorf("GitLab did not say what you may see: %w", err))
				return
			}
			p.visible = v
		}
		next.ServeHTTP(w, r.WithContext(WithPerson(r.Context(), p)))
	}))
	return mux
}

// errSignedOut: no session or token, or one that is no longer valid.
var errSignedOut = errors.New("sign in with GitLab to see this page")

// refuse answers an unauthenticated request: the sign-in page, or JSON
// for the API.
func (s *Service) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="depsd"`)
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": "sign in: send a GitLab personal access token as Authorization: Bearer <token>"})
		return
	}
	if errors.Is(err, errSignedOut) && r.Method == http.MethodGet {
		// A browser goes to the sign-in page, which brings it back here.
		http.Redirect(w, r, "/auth/signin?return="+url.QueryEscape(safeReturn(r.URL.RequestURI())), http.StatusSeeOther)
		return
	}
	msg := ""
	if !errors.Is(err, errSignedOut) {
		msg = err.Error()
	}
	s.signInPage(w, r, http.StatusUnauthorized, msg)
}

// authenticate finds who asks: a bearer token first (API clients), else
// the session cookie.
func (s *Service) authenticate(r *http.Request) (*Person, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || strings.TrimSpace(tok) == "" {
			return nil, errSignedOut
		}
		return s.bearer(r.Context(), strings.TrimSpace(tok))
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil, errSignedOut
	}
	return s.session(r.Context(), c.Value)
}

// bearer authenticates a personal access token: its user, asked of GitLab
// (and reused for bearerTTL).
func (s *Service) bearer(ctx context.Context, token string) (*Person, error) {
	client, err := s.clientFor(token, false)
	if err != nil {
		return nil, err
	}
	key := storedID(token)
	now := s.cfg.Now()
	s.mu.Lock()
	e, ok := s.bearers[key]
	s.mu.Unlock()
	if !ok || now.Sub(e.at) > bearerTTL {
		u, err := client.CurrentUser(ctx)
		if err != nil {
			if gitlab.IsPermanent(err) {
				return nil, errSignedOut
			}
			return nil, fmt.Errorf("ask GitLab who the token belongs to: %w", err)
		}
		e = bearerEntry{user: u, at: now}
		s.mu.Lock()
		if len(s.bearers) > 10000 {
			clear(s.bearers)
		}
		s.bearers[key] = e
		s.mu.Unlock()
	}
	return &Person{ID: e.user.ID, Username: e.user.Username, Bearer: true, client: client}, nil
}

// clientFor returns a client acting with token (kept while the token is
// in use: a client reuses its connections and keeps its own limits).
func (s *Service) clientFor(token string, oauth bool) (*gitlab.Client, error) {
	key := storedID(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[key]; ok {
		return c, nil
	}
	c, err := s.cfg.GitLab.WithToken(token, oauth)
	if err != nil {
		return nil, err
	}
	if len(s.clients) > 10000 {
		clear(s.clients)
	}
	s.clients[key] = c
	return c, nil
}

// storedToken is what a session's sealed token holds.
type storedToken struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	Expiry       time.Time `json:"expiry"`
}

// session authenticates a session cookie: signed with the store's key, of
// a session the store still has, not expired; its token is refreshed when
// it has expired.
func (s *Service) session(ctx context.Context, cookie string) (*Person, error) {
	raw, err := s.sign.open("session", cookie)
	if err != nil {
		return nil, errSignedOut
	}
	id := storedID(raw)
	se, ok, err := s.cfg.Store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	if !ok || !now.Before(se.ExpiresAt) {
		return nil, errSignedOut
	}
	tok, err := s.token(ctx, se)
	if err != nil {
		return nil, err
	}
	client, err := s.clientFor(tok.AccessToken, true)
	if err != nil {
		return nil, err
	}
	return &Person{ID: se.UserID, Username: se.Username, sessionID: id, csrf: s.sign.csrf(id), client: client}, nil
}

// token opens the session's token and refreshes it when it expired (or
// is about to). Replicas may refresh one session at once: GitLab revokes a
// refresh token once used, so the one that loses reads the winner's token
// from the store.
func (s *Service) token(ctx context.Context, se Session) (storedToken, error) {
	var tok storedToken
	open := func(se Session) error {
		plain, err := s.seal.open(se.ID, se.Token)
		if err != nil {
			return errSignedOut
		}
		return json.Unmarshal(plain, &tok)
	}
	if err := open(se); err != nil {
		return tok, err
	}
	if s.cfg.Now().Add(30 * time.Second).Before(tok.Expiry) {
		return tok, nil
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	// Another request of this process may have refreshed it meanwhile.
	if cur, ok, err := s.cfg.Store.Session(ctx, se.ID); err != nil {
		return tok, err
	} else if !ok {
		return tok, errSignedOut
	} else if err := open(cur); err != nil {
		return tok, err
	}
	if s.cfg.Now().Add(30 * time.Second).Before(tok.Expiry) {
		return tok, nil
	}
	fresh, err := s.oauth.TokenSource(s.httpContext(ctx), &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		// Another replica may have used the refresh token first.
		if cur, ok, rerr := s.cfg.Store.Session(ctx, se.ID); rerr == nil && ok {
			var other storedToken
			if plain, oerr := s.seal.open(cur.ID, cur.Token); oerr == nil && json.Unmarshal(plain, &other) == nil &&
				other.RefreshToken != tok.RefreshToken && s.cfg.Now().Before(other.Expiry) {
				return other, nil
			}
		}
		s.log.Info("session token could not be refreshed; signing out", "user", se.Username, "err", err)
		return tok, errSignedOut
	}
	tok = s.stored(fresh)
	if err := s.save(ctx, se, tok); err != nil {
		return tok, err
	}
	return tok, nil
}

// stored is what is kept of a token GitLab issued: its expiry on depsd's
// clock (Config.Now), from expires_in.
func (s *Service) stored(t *oauth2.Token) storedToken {
	exp := t.Expiry
	if t.ExpiresIn > 0 {
		exp = s.cfg.Now().Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return storedToken{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Expiry: exp}
}

// save seals tok into the session and stores it.
func (s *Service) save(ctx context.Context, se Session, tok storedToken) error {
	plain, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	se.Token = s.seal.seal(se.ID, plain)
	return s.cfg.Store.SaveSession(ctx, se)
}

// httpContext makes the oauth2 package use the server's connections.
func (s *Service) httpContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: 30 * time.Second})
}

// flow is what the sign-in cookie carries between /auth/login and
// /auth/callback.
type flow struct {
	State    string    `json:"s"`
	Verifier string    `json:"v"`
	Return   string    `json:"r"`
	Expires  time.Time `json:"e"`
}

// login starts the OAuth flow: a state and a PKCE verifier in a signed
// cookie, and the browser to GitLab.
func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	f := flow{State: randomID(24), Verifier: oauth2.GenerateVerifier(), Return: safeReturn(r.URL.Query().Get("return")),
		Expires: s.cfg.Now().Add(flowLifetime)}
	b, _ := json.Marshal(f)
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: s.sign.sign("flow", string(b)), Path: "/auth/",
		MaxAge: int(flowLifetime.Seconds()), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, s.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier)), http.StatusFound)
}

// callback ends the OAuth flow: the state checked against the cookie,
// the code exchanged with the verifier, the person read with the new
// token, a session stored and its cookie set.
func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := r.Cookie(flowCookie)
	if err != nil {
		s.signInPage(w, r, http.StatusBadRequest, "the sign-in took too long or cookies are off: sign in again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Path: "/auth/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	raw, err := s.sign.open("flow", c.Value)
	var f flow
	if err == nil {
		err = json.Unmarshal([]byte(raw), &f)
	}
	switch {
	case err != nil || !s.cfg.Now().Before(f.Expires):
		s.signInPage(w, r, http.StatusBadRequest, "the sign-in took too long: sign in again")
		return
	case q.Get("error") != "":
		s.signInPage(w, r, http.StatusUnauthorized, "GitLab did not sign you in: "+clip(q.Get("error_description"), 200))
		return
	case q.Get("state") != f.State || f.State == "":
		s.signInPage(w, r, http.StatusBadRequest, "this sign-in was not started here: sign in again")
		return
	}
	ctx := r.Context()
	tok, err := s.oauth.Exchange(s.httpContext(ctx), q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.log.Warn("OAuth code exchange failed", "err", err)
		s.signInPage(w, r, http.StatusUnauthorized, "GitLab refused the sign-in: sign in again")
		return
	}
	client, err := s.clientFor(tok.AccessToken, true)
	if err != nil {
		s.signInPage(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	user, err := client.CurrentUser(ctx)
	if err != nil {
		s.log.Warn("read the signed-in user", "err", err)
		s.signInPage(w, r, http.StatusBadGateway, "GitLab did not say who you are: sign in again")
		return
	}
	id := randomID(32)
	now := s.cfg.Now()
	se := Session{ID: storedID(id), UserID: user.ID, Username: user.Username, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionLifetime)}
	if err := s.save(ctx, se, s.stored(tok)); err != nil {
		s.log.Error("store a session", "err", err)
		s.signInPage(w, r, http.StatusServiceUnavailable, "depsd could not keep your session: try again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: s.sign.sign("session", id), Path: "/",
		MaxAge: int(s.cfg.SessionLifetime.Seconds()), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	s.log.Info("signed in", "user", user.Username, "user_id", user.ID)
	http.Redirect(w, r, f.Return, http.StatusFound)
}

// logout ends the session (its cookie is refused from now on, on every
// replica) and revokes its token on GitLab.
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(SessionCookie)
	if err == nil {
		p, err := s.session(r.Context(), c.Value)
		if err == nil {
			if !s.CheckCSRF(r, p) {
				http.Error(w, "the form's CSRF token is missing or wrong: reload the page", http.StatusForbidden)
				return
			}
			if se, ok, err := s.cfg.Store.Session(r.Context(), p.sessionID); err == nil && ok {
				if plain, err := s.seal.open(se.ID, se.Token); err == nil {
					var tok storedToken
					if json.Unmarshal(plain, &tok) == nil {
						s.revoke(r.Context(), tok.AccessToken)
					}
				}
			}
			if err := s.cfg.Store.DeleteSession(r.Context(), p.sessionID); err != nil {
				http.Error(w, "depsd could not end your session: try again", http.StatusServiceUnavailable)
				return
			}
			s.vis.forget(p.ID)
			s.log.Info("signed out", "user", p.Username)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/auth/signin", http.StatusSeeOther)
}

// revoke revokes an access token (and its refresh token) on GitLab, as
// best it can: the session is gone either way.
func (s *Service) revoke(ctx context.Context, token string) {
	form := url.Values{"token": {token}, "client_id": {s.cfg.ClientID}, "client_secret": {s.cfg.ClientSecret}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.cfg.GitLab.BaseURL(), "/")+"/oauth/revoke", strings.NewReader(form.Encode()))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		s.log.Warn("revoke a token on sign-out", "err", err)
		return
	}
	resp.Body.Close()
}

// CheckCSRF reports whether an action request carries the session's CSRF
// token (form field csrf, or header X-CSRF-Token). Bearer requests carry
// none and need none: a browser never sends a personal access token by
// itself.
func (s *Service) CheckCSRF(r *http.Request, p *Person) bool {
	if p == nil {
		return false
	}
	if p.Bearer {
		return true
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && p.csrf != "" && constantEqual(got, p.csrf)
}

// PruneSessions removes expired sessions from the store.
func (s *Service) PruneSessions(ctx context.Context) (int, error) {
	return s.cfg.Store.PruneSessions(ctx, s.cfg.Now())
}

// safeReturn is where a sign-in may send the browser back to: a path of
// depsd's own.
func safeReturn(to string) string {
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || strings.HasPrefix(to, "/\\") || strings.HasPrefix(to, "/auth/") {
		return "/"
	}
	return to
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
