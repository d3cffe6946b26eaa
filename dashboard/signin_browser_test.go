package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scheduler"
)

// TestSignInAndRetryInBrowser: with sign-in on, a browser that opens a
// chain's page gets the sign-in page, goes through GitLab's sign-in page
// and comes back to the chain, where a member in a project ann cannot see
// is shown as hidden; her retry of the failed member, from the page,
// unblocks the chain, which finishes on the open page with her retry in
// its audit log.
func TestSignInAndRetryInBrowser(t *testing.T) {
	projects := []gitlabtest.Project{
		{Path: "acme/images/base", Files: map[string]string{"Containerfile": "FROM debian:bookworm-slim\n"}},
		{Path: "acme/images/ruby", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/images/base:latest\n"}},
		{Path: "acme/apps/shop", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/images/ruby:latest\n"}},
		{Path: "vault/images/hsm", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/images/base:latest\n"}},
	}
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-ui"})
	t.Cleanup(srv.Close)
	for _, p := range projects {
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
	}
	ann, err := srv.AddUser("ann")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddMember("acme", "ann", gitlabtest.AccessDeveloper); err != nil {
		t.Fatal(err)
	}
	s := serveWith(t, srv, projects, map[string]string{}, scheduler.Config{}, func(cfg *config.Config, addr string) {
		cfg.Scope.Groups = append(cfg.Scope.Groups, "vault")
		app, err := srv.AddOAuthApp("http://"+addr+"/auth/callback", "read_api")
		if err != nil {
			t.Fatal(err)
		}
		cfg.UI.URL, cfg.UI.OAuth.ClientID, cfg.UI.OAuth.ClientSecret = "http://"+addr, app.ClientID, app.Secret
	})
	// The browser after the daemon, so that it is closed first when the
	// test ends: Chromium keeps connections open that it has not used
	// yet, which the daemon's drain would wait for.
	b := newBrowser(t)

	// A chain through the vault's image, blocked by ruby's failure.
	id := s.rebuild(t, "acme/images/base")
	s.drive(t, "acme/images/base", "success")
	s.drive(t, "vault/images/hsm", "success")
	s.drive(t, "acme/images/ruby", "failed")
	s.waitChain(t, id, chain.Blocked)

	chainURL := fmt.Sprintf("%s/chains/%d", s.url, id)
	b.open(t, chainURL)
	if h := eval[string](t, b, `document.querySelector("main h1").textContent`); h != "Sign in" {
		t.Fatalf("an outsider's chain page: %q, want the sign-in page", h)
	}
	if body := eval[string](t, b, `document.body.innerText`); strings.Contains(body, "acme/") || strings.Contains(body, "vault") {
		t.Errorf("the sign-in page shows a project: %s", body)
	}
	b.screenshot(t, "signin")
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.Click("#signin-gitlab"),
		chromedp.WaitVisible("#user_login"),
		chromedp.SendKeys("#user_login", "ann"),
		chromedp.SendKeys("#user_password", ann.Password),
		chromedp.Click("#sign_in"),
		chromedp.WaitVisible("#viewer-name"),
	); err != nil {
		t.Fatalf("sign-in round trip through GitLab's sign-in page: %v", err)
	}
	b.waitFor(t, "the chain's page after sign-in", fmt.Sprintf(`document.querySelector("main h1").textContent === "Chain %d"`, id))
	if loc := eval[string](t, b, `location.href`); loc != chainURL {
		t.Errorf("back at %s, want %s", loc, chainURL)
	}
	body := eval[string](t, b, `document.querySelector("main").innerText`)
	if strings.Contains(body, "vault") || strings.Contains(body, "hsm") {
		t.Errorf("ann's chain page names the vault's project:\n%s", body)
	}
	if n := eval[int](t, b, `document.querySelectorAll("tr[data-member^='hidden-'] .hidden-project").length`); n != 1 {
		t.Errorf("%d hidden members shown, want 1", n)
	}
	if got := eval[string](t, b, memberState("acme/images/ruby")); got != "failed" {
		t.Fatalf("ruby is %q on the page, want failed", got)
	}
	b.screenshot(t, "chain-signed-in", true)

	// The retry, from the page.
	if err := chromedp.Do(ctx, chromedp.Click(`tr[data-member="acme/images/ruby"] button[data-act=retry]`)); err != nil {
		t.Fatal(err)
	}
	// The form's answer is a redirect to the chain's page: wait across
	// the navigation.
	deadline := time.Now().Add(pageTimeout)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`["pending", "triggered"].includes(%s)`, memberState("acme/images/ruby"))))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ruby not queued again on the page after the retry: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	retried := newestPipeline(t, s, "acme/images/ruby")
	if err := s.srv.SetPipelineStatus(retried, "success"); err != nil {
		t.Fatal(err)
	}
	s.drive(t, "acme/apps/shop", "success")
	b.waitFor(t, "the chain to finish on the open page", memberState("acme/apps/shop")+` === "success"`)
	s.waitChain(t, id, chain.Finished)
	b.open(t, chainURL)
	audit := eval[string](t, b, `(document.querySelector("table.audit") || {innerText: ""}).innerText`)
	if !strings.Contains(audit, "ann") || !strings.Contains(audit, "retry") || !strings.Contains(audit, "acme/images/ruby") {
		t.Errorf("the chain's audit log: %q", audit)
	}
	if n := len(s.srv.Pipelines("acme/images/ruby")); n != 2 {
		t.Errorf("ruby built %d times, want 2", n)
	}
	for _, e := range b.errors() {
		if strings.Contains(e, s.url) { // not the fake GitLab's own page
			t.Errorf("console error: %s", e)
		}
	}
}

// newestPipeline waits for a second pipeline depsd created for project
// and returns it.
func newestPipeline(t testing.TB, s *served, project string) int64 {
	t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for time.Now().Before(deadline) {
		if ps := s.srv.Pipelines(project); len(ps) > 1 && ps[len(ps)-1].Source == "api" {
			return ps[len(ps)-1].ID
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no second pipeline of %s within %s", project, pageTimeout)
	return 0
}
