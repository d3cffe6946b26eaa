package dashboard_test

import (
	"fmt"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler"
)

// TestWaitingMergeInBrowser: base → ruby → app, app pinning ruby by
// digest, on a real registry. Once ruby's new image is verified, the
// chain's page shows app waiting for the merge request that moves its pin
// (its own glyph and count, the merge request's link) and lists what
// depsd wrote to GitLab (docs/screenshots/chain-waiting-merge.png).
func TestWaitingMergeInBrowser(t *testing.T) {
	b := newBrowser(t)
	host := registrytest.Start(t)
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-ui", RegistryHost: host})
	t.Cleanup(srv.Close)
	img := func(p string) string { return host + "/" + p + ":latest" }
	old := registrytest.Push(t, img("acme/images/ruby"))
	projects := []gitlabtest.Project{
		{Path: "acme/images/base", Files: map[string]string{"Containerfile": "FROM scratch\n"}},
		{Path: "acme/images/ruby", Files: map[string]string{"Containerfile": "FROM " + img("acme/images/base") + "\n"}},
		{Path: "acme/apps/shop", Files: map[string]string{"Containerfile": "# ruby moves in review\nARG RUBY=" + img("acme/images/ruby") + "@" + old + "\nFROM ${RUBY}\n"}},
		{Path: "acme/apps/docs", Files: map[string]string{".gitlab-deps": "acme/apps/shop\n"}},
	}
	for _, p := range projects {
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
	}
	for p, from := range map[string]string{"acme/images/base": "", "acme/images/ruby": img("acme/images/base"), "acme/apps/shop": img("acme/images/ruby")} {
		if err := srv.SetImages(p, gitlabtest.Images{Refs: []string{img(p)}, From: from, Annotate: from != ""}); err != nil {
			t.Fatal(err)
		}
	}
	s := serveOn(t, srv, projects, map[string]string{}, scheduler.Config{})
	id := s.rebuild(t, "acme/images/base")
	s.drive(t, "acme/images/base", "running", "success")
	s.drive(t, "acme/images/ruby", "running", "success")
	b.open(t, fmt.Sprintf("%s/chains/%d", s.url, id))
	b.waitFor(t, "shop shown waiting for its merge request", memberState("acme/apps/shop")+` === "waiting-merge"`)
	b.waitFor(t, "the merge request linked", `!!document.querySelector('tr[data-member="acme/apps/shop"] a[href*="/merge_requests/"]')`)
	text := eval[string](t, b, `document.querySelector("section.chain").textContent`)
	for _, want := range []string{"⇄ 1 waiting-merge", "merge request !1", "Written to GitLab", "opened merge request !1"} {
		if !strings.Contains(text, want) {
			t.Errorf("the chain's page does not say %q:\n%s", want, text)
		}
	}
	if state := eval[string](t, b, memberState("acme/apps/docs")); state != string(chain.Waiting) {
		t.Errorf("docs %s, want waiting for shop", state)
	}
	b.screenshot(t, "chain-waiting-merge", true)
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
