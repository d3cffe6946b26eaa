package gitlabtest

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// settable is a clock a test moves.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settable) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settable) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// authorize follows GET /oauth/authorize without following the redirect
// to the application, and returns where it was sent.
func authorize(t *testing.T, client *http.Client, authURL string, hdr map[string]string) *url.URL {
	t.Helper()
	c := *client
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), "http://app.example/") {
			return http.ErrUseLastResponse
		}
		return nil
	}
	req, _ := http.NewRequest("GET", authURL, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d, want a redirect to the application", resp.StatusCode)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// The whole sign-in round trip with golang.org/x/oauth2, as an
// application does it: authorize with PKCE S256 (the user approving is
// the test header's), exchange the code with its verifier, read GET
// /user as the user, refresh, revoke; a read_api token cannot write, an
// expired one is refused with GitLab's words.
func TestOAuthRoundTrip(t *testing.T) {
	clock := &settable{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := New(Options{Now: clock.now})
	defer s.Close()
	seed(t, s, "g/app")
	if _, err := s.AddUser("ann"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember("g/app", "ann", AccessDeveloper); err != nil {
		t.Fatal(err)
	}
	app := mustDo[OAuthApp](t)(s.AddOAuthApp("http://app.example/callback", "read_api", "read_user"))
	cfg := &oauth2.Config{
		ClientID: app.ClientID, ClientSecret: app.Secret, RedirectURL: app.RedirectURI, Scopes: []string{"read_api"},
		Endpoint: oauth2.Endpoint{AuthURL: s.URL + "/oauth/authorize", TokenURL: s.URL + "/oauth/token"},
	}
	verifier := oauth2.GenerateVerifier()
	back := authorize(t, http.DefaultClient, cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier)),
		map[string]string{TestUserHeader: "ann"})
	if back.Query().Get("state") != "st4te" || back.Query().Get("code") == "" {
		t.Fatalf("redirect %s: want a code and the state", back)
	}
	ctx := context.Background()
	code := back.Query().Get("code")
	if _, err := cfg.Exchange(ctx, code, oauth2.VerifierOption("wrong-verifier-wrong-verifier-wrong-verifier")); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("exchange with a wrong verifier: %v, want invalid_grant", err)
	}
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.ExpiresIn != 7200 || tok.Extra("created_at") != float64(clock.now().Unix()) || tok.Extra("scope") != "read_api" {
		t.Fatalf("token %+v (scope %v)", tok, tok.Extra("scope"))
	}
	if _, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier)); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("second exchange of one code: %v, want invalid_grant", err)
	}

	code2, body := callAs(t, s, tok.AccessToken, "GET", "/user", nil)
	if code2 != 200 || decode[map[string]any](t, body)["username"] != "ann" {
		t.Fatalf("GET /user as ann: %d %s", code2, body)
	}
	if code2, body := callAs(t, s, tok.AccessToken, "POST", "/projects/g%2Fapp/pipeline", map[string]any{"ref": "main"}); code2 != 403 || !strings.Contains(body, "insufficient_scope") {
		t.Fatalf("a write with read_api: %d %s", code2, body)
	}

	clock.add(7201 * time.Second)
	if code2, body := callAs(t, s, tok.AccessToken, "GET", "/user", nil); code2 != 401 || !strings.Contains(body, "Token is expired. You can either do re-authorization or token refresh.") {
		t.Fatalf("expired: %d %s", code2, body)
	}
	// x/oauth2 judges expiry by the real clock, not the fake's: refresh
	// with the refresh token alone.
	fresh, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if code2, _ := callAs(t, s, fresh.AccessToken, "GET", "/user", nil); code2 != 200 {
		t.Fatalf("refreshed token: %d", code2)
	}
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("reused refresh token: %v, want invalid_grant", err)
	}

	form := url.Values{"token": {fresh.AccessToken}, "client_id": {app.ClientID}, "client_secret": {app.Secret}}
	resp, err := http.PostForm(s.URL+"/oauth/revoke", form)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	resp.Body.Close()
	if code2, body := callAs(t, s, fresh.AccessToken, "GET", "/user", nil); code2 != 401 || !strings.Contains(body, "Token was revoked") {
		t.Fatalf("revoked: %d %s", code2, body)
	}
}

func isOAuthError(err error, code string) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == code
}

// Authorization requests GitLab refuses: an unknown client and a foreign
// redirect URI get an error page; a missing PKCE challenge, plain PKCE, an
// unknown scope and another response type go back to the application
// with the error and the state; nobody signed in goes to the sign-in page,
// whose form signs the user in and comes back.
func TestOAuthAuthorizeRefusals(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	ann := mustDo[User](t)(s.AddUser("ann"))
	app := mustDo[OAuthApp](t)(s.AddOAuthApp("http://app.example/callback", "read_api"))
	base := url.Values{"client_id": {app.ClientID}, "redirect_uri": {app.RedirectURI}, "response_type": {"code"},
		"state": {"xyz"}, "scope": {"read_api"}, "code_challenge": {pkceS256("v")}, "code_challenge_method": {"S256"}}
	with := func(k, v string) string {
		q := url.Values{}
		for kk, vv := range base {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return s.URL + "/oauth/authorize?" + q.Encode()
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		name, url string
		code      int
		errCode   string
	}{
		{"unknown client", with("client_id", "nope"), 401, ""},
		{"foreign redirect", with("redirect_uri", "http://evil.example/cb"), 400, ""},
		{"no challenge", with("code_challenge", ""), 302, "invalid_request"},
		{"plain challenge", with("code_challenge_method", "plain"), 302, "invalid_request"},
		{"unknown scope", with("scope", "api"), 302, "invalid_scope"},
		{"token response", with("response_type", "token"), 302, "unsupported_response_type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tt.url, nil)
			req.Header.Set(TestUserHeader, "ann")
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("%d, want %d", resp.StatusCode, tt.code)
			}
			if tt.errCode != "" {
				loc := must(url.Parse(resp.Header.Get("Location")))
				if !strings.HasPrefix(loc.String(), app.RedirectURI) || loc.Query().Get("error") != tt.errCode || loc.Query().Get("state") != "xyz" {
					t.Fatalf("redirect %s, want %s with error %s and the state", loc, app.RedirectURI, tt.errCode)
				}
			}
		})
	}

	// Nobody signed in: the sign-in page, then back with a code.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(with("", ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/users/sign_in" {
		t.Fatalf("not signed in: ended at %s, want the sign-in page", resp.Request.URL)
	}
	redirectTo := resp.Request.URL.Query().Get("redirect_to")
	if bad, _ := browser.PostForm(s.URL+"/users/sign_in", url.Values{"user[login]": {"ann"}, "user[password]": {"wrong"}, "redirect_to": {redirectTo}}); bad.StatusCode != 401 {
		t.Fatalf("wrong password: %d, want 401", bad.StatusCode)
	}
	back := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host == "app.example" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err = back.PostForm(s.URL+"/users/sign_in", url.Values{"user[login]": {"ann"}, "user[password]": {ann.Password}, "redirect_to": {redirectTo}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := must(url.Parse(resp.Header.Get("Location")))
	if resp.StatusCode != 302 || loc.Host != "app.example" || loc.Query().Get("code") == "" || loc.Query().Get("state") != "xyz" {
		t.Fatalf("after sign-in: %d %s, want back at the application with a code", resp.StatusCode, loc)
	}
}
