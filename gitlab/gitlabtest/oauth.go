package gitlabtest

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// GitLab's OAuth 2 provider (Doorkeeper), for applications that sign
// people in with their GitLab account:
//
//   - AddOAuthApp registers an application (a confidential one: its
//     secret is needed at /oauth/token) with its redirect URI and scopes.
//   - GET /oauth/authorize (response_type=code, client_id, redirect_uri,
//     state, scope, and PKCE: code_challenge with code_challenge_method
//     S256, which the fake requires) redirects to redirect_uri with a code
//     and the state, as if the signed-in user had approved the
//     application. The user is the browser's (a session made on the
//     sign-in page, /users/sign_in, with the user's Password), else the
//     one a request names in the X-Gitlabtest-User header (tests), else
//     SetBrowserUser's; with none the browser is sent to the sign-in page
//     first. An unknown client or a redirect URI that is not the
//     application's answers an error page (401, 400); other errors go back
//     to redirect_uri with error, error_description and state.
//   - POST /oauth/token: grant_type authorization_code (code, redirect_uri,
//     code_verifier checked against the challenge; a code is good once,
//     for 10 minutes) or refresh_token (the old access and refresh tokens
//     are revoked); the client authenticates with client_id and
//     client_secret, in the body or as HTTP Basic. Errors are Doorkeeper's
//     {"error":"invalid_grant","error_description":...} (400; 401 for
//     invalid_client).
//   - Access tokens last 7200 s (expires_in, created_at) and act as their
//     user on the REST API as a Bearer token, within their scopes
//     (users.go): a read_api token may only GET.
//   - POST /oauth/revoke revokes an access or refresh token (200 {}).

// accessTokenLifetime is GitLab's OAuth access token lifetime.
const accessTokenLifetime = 7200 * time.Second

// authorizationCodeLifetime is Doorkeeper's default.
const authorizationCodeLifetime = 10 * time.Minute

// TestUserHeader names the user who approves an authorization request in
// a test that has no browser session (GET /oauth/authorize).
const TestUserHeader = "X-Gitlabtest-User"

// sessionCookie is the browser session the sign-in page makes.
const sessionCookie = "_gitlab_session"

// Doorkeeper's error descriptions.
const (
	descInvalidClient   = "Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method."
	descInvalidGrant    = "The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client."
	descInvalidRedirect = "The requested redirect uri is malformed or doesn't match client redirect URI."
	descInvalidScope    = "The requested scope is invalid, unknown, or malformed."
	descUnsupportedType = "The authorization server does not support this response type."
	descUnsupportedGT   = "The authorization grant type is not supported by the authorization server."
)

// OAuthApp is an application registered with AddOAuthApp.
type OAuthApp struct {
	ClientID, Secret string
	RedirectURI      string
	Scopes           []string
}

type oauthState struct {
	apps     map[string]*OAuthApp // by client id
	codes    map[string]*oauthCode
	refresh  map[string]*accessToken // refresh token → its access token
	sessions map[string]int64        // session cookie → user id
	browser  string                  // SetBrowserUser
}

type oauthCode struct {
	clientID, redirectURI, challenge string
	userID                           int64
	scopes                           []string
	expiresAt                        time.Time
	used                             bool
}

// oauthGrant is what an OAuth access token was issued for.
type oauthGrant struct {
	clientID, accessToken, refreshToken string
}

func (o *oauthState) init() {
	if o.apps == nil {
		o.apps = map[string]*OAuthApp{}
		o.codes = map[string]*oauthCode{}
		o.refresh = map[string]*accessToken{}
		o.sessions = map[string]int64{}
	}
}

// AddOAuthApp registers an OAuth application with its redirect URI and
// scopes (api, read_api, read_user, ...), and returns its client id and
// secret.
func (s *Server) AddOAuthApp(redirectURI string, scopes ...string) (OAuthApp, error) {
	u, err := url.Parse(redirectURI)
	if err != nil || !u.IsAbs() || u.Fragment != "" {
		return OAuthApp{}, fmt.Errorf("add OAuth application: redirect URI %q must be an absolute URI without a fragment", redirectURI)
	}
	if len(scopes) == 0 {
		return OAuthApp{}, fmt.Errorf("add OAuth application: no scopes")
	}
	for _, sc := range scopes {
		if !slices.Contains(knownScopes, sc) {
			return OAuthApp{}, fmt.Errorf("add OAuth application: unknown scope %q", sc)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	o := &s.auth.oauth
	o.init()
	app := &OAuthApp{ClientID: randomToken("", 32), Secret: randomToken("gloas-", 32), RedirectURI: redirectURI, Scopes: slices.Clone(scopes)}
	o.apps[app.ClientID] = app
	return *app, nil
}

// SetBrowserUser makes username the user signed in to the browser that
// GET /oauth/authorize sees when the request has no session of its own
// and no X-Gitlabtest-User header; "" signs it out.
func (s *Server) SetBrowserUser(username string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.findUser(username); !ok && username != "" {
		return fmt.Errorf("set browser user: no such user %s", username)
	}
	s.auth.oauth.browser = username
	return nil
}

// browserUser is who GET /oauth/authorize acts for. Callers hold s.mu.
func (s *Server) browserUser(r *http.Request) (*fakeUser, bool) {
	o := &s.auth.oauth
	if c, err := r.Cookie(sessionCookie); err == nil {
		if id, ok := o.sessions[c.Value]; ok {
			return s.auth.users[id], true
		}
	}
	if name := cmp.Or(r.Header.Get(TestUserHeader), o.browser); name != "" {
		return s.findUser(name)
	}
	return nil, false
}

func oauthErrorPage(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>An error has occurred</title></head><body><h1>An error has occurred</h1><p id=\"%s\">%s</p></body></html>\n",
		html.EscapeString(code), html.EscapeString(desc))
}

// redirectWith sends the browser to target with query values added.
func redirectWith(w http.ResponseWriter, r *http.Request, target string, v url.Values) {
	u, _ := url.Parse(target)
	q := u.Query()
	for k, vals := range v {
		if len(vals) > 0 && vals[0] != "" {
			q.Set(k, vals[0])
		}
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// oauthAuthorize is GET /oauth/authorize.
func (s *Server) oauthAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	o := &s.auth.oauth
	o.init()
	app, ok := o.apps[q.Get("client_id")]
	if !ok {
		oauthErrorPage(w, http.StatusUnauthorized, "invalid_client", descInvalidClient)
		return
	}
	redirect := cmp.Or(q.Get("redirect_uri"), app.RedirectURI)
	if redirect != app.RedirectURI {
		oauthErrorPage(w, http.StatusBadRequest, "invalid_redirect_uri", descInvalidRedirect)
		return
	}
	state := q.Get("state")
	fail := func(code, desc string) {
		redirectWith(w, r, redirect, url.Values{"error": {code}, "error_description": {desc}, "state": {state}})
	}
	if q.Get("response_type") != "code" {
		fail("unsupported_response_type", descUnsupportedType)
		return
	}
	scopes := strings.Fields(cmp.Or(q.Get("scope"), "api"))
	for _, sc := range scopes {
		if !slices.Contains(app.Scopes, sc) {
			fail("invalid_scope", descInvalidScope)
			return
		}
	}
	switch {
	case q.Get("code_challenge") == "":
		fail("invalid_request", "Code challenge is required.")
		return
	case q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "The code challenge method must be S256.")
		return
	}
	user, ok := s.browserUser(r)
	if !ok {
		http.Redirect(w, r, s.URL+"/users/sign_in?redirect_to="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
		return
	}
	code := randomToken("", 32)
	o.codes[code] = &oauthCode{clientID: app.ClientID, redirectURI: redirect, challenge: q.Get("code_challenge"),
		userID: user.id, scopes: scopes, expiresAt: s.now().Add(authorizationCodeLifetime)}
	redirectWith(w, r, redirect, url.Values{"code": {code}, "state": {state}})
}

type tokenJSON struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	CreatedAt    int64  `json:"created_at"`
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// client authenticates the OAuth client of a token or revoke request:
// client_id and client_secret in the body, or HTTP Basic. Callers hold s.mu.
func (s *Server) client(r *http.Request, prm params) (*OAuthApp, bool) {
	id, _ := prm.str("client_id")
	secret, _ := prm.str("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(u)
		secret, _ = url.QueryUnescape(p)
	}
	app, ok := s.auth.oauth.apps[id]
	if !ok || subtle.ConstantTimeCompare([]byte(secret), []byte(app.Secret)) != 1 {
		return nil, false
	}
	return app, true
}

// issue makes an access token and its refresh token. Callers hold s.mu.
func (s *Server) issue(clientID string, userID int64, scopes []string) tokenJSON {
	now := s.now()
	g := &oauthGrant{clientID: clientID, accessToken: randomToken("", 32), refreshToken: randomToken("", 32)}
	t := &accessToken{userID: userID, scopes: scopes, createdAt: now, expiresAt: now.Add(accessTokenLifetime), oauth: g}
	s.auth.tokens[g.accessToken] = t
	s.auth.oauth.refresh[g.refreshToken] = t
	return tokenJSON{AccessToken: g.accessToken, TokenType: "Bearer", ExpiresIn: int64(accessTokenLifetime / time.Second),
		RefreshToken: g.refreshToken, Scope: strings.Join(scopes, " "), CreatedAt: now.Unix()}
}

// pkceS256 is BASE64URL(SHA256(verifier)), RFC 7636.
func pkceS256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// oauthToken is POST /oauth/token.
func (s *Server) oauthToken(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	o := &s.auth.oauth
	o.init()
	grant, _ := prm.str("grant_type")
	switch grant {
	case "authorization_code", "refresh_token":
	case "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "Missing required parameter: grant_type.")
		return
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", descUnsupportedGT)
		return
	}
	app, ok := s.client(r, prm)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", descInvalidClient)
		return
	}
	if grant == "refresh_token" {
		rt, _ := prm.str("refresh_token")
		old, ok := o.refresh[rt]
		if !ok || old.revoked || old.oauth.clientID != app.ClientID {
			oauthError(w, http.StatusBadRequest, "invalid_grant", descInvalidGrant)
			return
		}
		old.revoked = true
		delete(o.refresh, rt)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, s.issue(app.ClientID, old.userID, old.scopes))
		return
	}
	codeStr, _ := prm.str("code")
	verifier, _ := prm.str("code_verifier")
	redirect, _ := prm.str("redirect_uri")
	code, ok := o.codes[codeStr]
	switch {
	case !ok || code.used || !s.now().Before(code.expiresAt) || code.clientID != app.ClientID || code.redirectURI != redirect:
		oauthError(w, http.StatusBadRequest, "invalid_grant", descInvalidGrant)
		return
	case verifier == "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "Missing required parameter: code_verifier.")
		return
	case subtle.ConstantTimeCompare([]byte(pkceS256(verifier)), []byte(code.challenge)) != 1:
		oauthError(w, http.StatusBadRequest, "invalid_grant", descInvalidGrant)
		return
	}
	code.used = true
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.issue(app.ClientID, code.userID, code.scopes))
}

// oauthRevoke is POST /oauth/revoke (RFC 7009): the access token or the
// refresh token, with the other of its pair.
func (s *Server) oauthRevoke(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	o := &s.auth.oauth
	o.init()
	app, ok := s.client(r, prm)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", descInvalidClient)
		return
	}
	tok, _ := prm.str("token")
	t, ok := s.auth.tokens[tok]
	if !ok {
		t, ok = o.refresh[tok]
	}
	if ok && t.oauth != nil && t.oauth.clientID == app.ClientID {
		t.revoked = true
		delete(o.refresh, t.oauth.refreshToken)
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// safeReturn is where the sign-in page may send the browser back to: a
// path of this server.
func safeReturn(to string) string {
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") {
		return "/"
	}
	return to
}

// signInPage is GET /users/sign_in: a form asking for a user's name and
// password (AddUser's User.Password).
func (s *Server) signInPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!DOCTYPE html><html><head><title>Sign in · GitLab</title></head><body>
<form method="post" action="/users/sign_in">
<label>Username <input id="user_login" name="user[login]" autocomplete="username"></label>
<label>Password <input id="user_password" name="user[password]" type="password"></label>
<input type="hidden" name="redirect_to" value="%s">
<button id="sign_in" type="submit">Sign in</button>
</form></body></html>
`, html.EscapeString(safeReturn(r.URL.Query().Get("redirect_to"))))
}

// signIn is POST /users/sign_in: a session cookie for the user, and back
// to where the browser came from.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	o := &s.auth.oauth
	o.init()
	u, ok := s.findUser(r.PostForm.Get("user[login]"))
	if !ok || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("user[password]")), []byte(s.auth.passwords[u.id])) != 1 {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, "<!DOCTYPE html><html><body><p id=\"flash\">Invalid login or password.</p></body></html>\n")
		return
	}
	session := randomToken("", 16)
	o.sessions[session] = u.id
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, s.URL+safeReturn(r.PostForm.Get("redirect_to")), http.StatusFound)
}
