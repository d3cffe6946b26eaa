package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler"
)

// TestValidationInBrowser: base → {ruby, python}, ruby → shop, premerge
// on base at depth all, on a real registry. A merge request of base
// pushes its candidate; its validation's page (the link of the commit
// status depsd/dependents) shows the dependents building on it, then,
// without a reload, ruby failed (its build breaks on the candidate) with
// its pipeline's link, python built with the image it pushed for the
// level below, lint built on that, shop blocked under ruby; the list of validations names
// the merge request (docs/screenshots/validation.png).
func TestValidationInBrowser(t *testing.T) {
	b := newBrowser(t)
	host := registrytest.Start(t)
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-ui", RegistryHost: host})
	t.Cleanup(srv.Close)
	img := func(p string) string { return host + "/" + p + ":latest" }
	const ci = "build:\n  script:\n    - build --validate \"$DEPSD_VALIDATE\" --contexts \"$DEPSD_BUILD_CONTEXTS\" --tag \"$DEPSD_VALIDATE_TAG\"\n"
	base, ruby, python, shop, lint := "acme/images/base", "acme/images/ruby", "acme/images/python", "acme/apps/shop", "acme/tools/lint"
	from := map[string]string{base: "", ruby: img(base), python: img(base), shop: img(ruby), lint: img(python)}
	var projects []gitlabtest.Project
	for _, p := range []string{base, ruby, python, shop, lint} {
		cf := "FROM scratch\n"
		if from[p] != "" {
			cf = "FROM " + from[p] + "\n"
		}
		projects = append(projects, gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": cf, ".gitlab-ci.yml": ci}})
	}
	for _, p := range projects {
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetImages(p.Path, gitlabtest.Images{Refs: []string{img(p.Path)}, From: from[p.Path], Annotate: from[p.Path] != ""}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetPipelineBehavior(p.Path, gitlabtest.Behavior{OnMergeRequest: true}); err != nil {
			t.Fatal(err)
		}
	}
	// The base's release, which the others are built on (before depsd
	// listens: no chain follows).
	rel, err := srv.RunPipeline(base, "main", "push")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetPipelineStatus(rel, "success"); err != nil {
		t.Fatal(err)
	}
	s := serveWith(t, srv, projects, map[string]string{}, scheduler.Config{}, func(cfg *config.Config, _ string) {
		cfg.Premerge = []config.Premerge{{Projects: []string{base}, Depth: "all"}}
	})

	if err := srv.CreateBranch(base, "slim"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetFileOn(base, "slim", "Containerfile", "FROM scratch\n# without ruby's libraries\n"); err != nil {
		t.Fatal(err)
	}
	iid, err := srv.OpenMR(base, "slim", "main", "Slim the base image")
	if err != nil {
		t.Fatal(err)
	}
	var mrp gitlabtest.Pipeline
	for _, p := range srv.Pipelines(base) {
		if p.MergeRequestIID == iid {
			mrp = p
		}
	}
	if mrp.ID == 0 {
		t.Fatal("the merge request started no pipeline")
	}
	before := len(srv.PublishedImages())
	if err := srv.SetPipelineStatus(mrp.ID, "success"); err != nil {
		t.Fatal(err)
	}
	pushed := srv.PublishedImages()[before:]
	if len(pushed) == 0 {
		t.Fatal("the merge request pipeline pushed no candidate")
	}
	cand := pushed[0].Digest
	srv.BreakBuildOn(ruby, cand)

	// The validation starts; its page is the status's link.
	var id int64
	waitUntil(t, "the validation started", func() bool {
		vs, err := s.engine.Validations(context.Background(), chain.MRFilter{})
		if err == nil && len(vs) == 1 && vs[0].Chain != nil {
			id = vs[0].Chain.ID
		}
		return id != 0
	})
	t.Cleanup(func() {
		if t.Failed() {
			vs, err := s.engine.Validations(context.Background(), chain.MRFilter{})
			t.Logf("validations: %+v %v", vs, err)
			if len(vs) > 0 && vs[0].Chain != nil {
				t.Logf("members: %+v", vs[0].Chain.Members)
			}
			for _, p := range srv.Pipelines(ruby) {
				t.Logf("ruby pipeline: %+v", p)
			}
		}
	})
	rubyPl := waitValidation(t, srv, ruby)
	pyPl := waitValidation(t, srv, python)
	page := fmt.Sprintf("%s/validations/%d", s.url, id)
	waitUntil(t, "the status links the page", func() bool {
		for _, st := range srv.Statuses(base, mrp.SHA) {
			if st.Name == chain.ValidationStatusName && st.TargetURL == page {
				return true
			}
		}
		return false
	})
	b.open(t, page)
	b.waitFor(t, "ruby shown building", memberState(ruby)+` === "triggered" || `+memberState(ruby)+` === "running"`)
	if got := eval[string](t, b, `document.querySelector("#candidate").textContent`); !strings.Contains(got, cand) {
		t.Errorf("candidate shown %q, want its digest %s", got, cand)
	}
	eval[bool](t, b, `(window.depsdNotReloaded = true)`)

	if err := srv.SetPipelineStatus(rubyPl, "success"); err != nil { // its build breaks on the candidate
		t.Fatal(err)
	}
	if err := srv.SetPipelineStatus(pyPl, "success"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "ruby shown failed", memberState(ruby)+` === "failed"`)
	b.waitFor(t, "python shown built", memberState(python)+` === "success"`)
	b.waitFor(t, "shop shown blocked", memberState(shop)+` === "blocked"`)
	lintPl := waitValidation(t, srv, lint) // on python's validation image
	if err := srv.SetPipelineStatus(lintPl, "success"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "lint shown built", memberState(lint)+` === "success"`)
	b.waitFor(t, "the validation shown ended", `document.querySelector("#validation").hasAttribute("data-live-done")`)
	if !eval[bool](t, b, `window.depsdNotReloaded === true`) {
		t.Error("the page was reloaded to show the change")
	}
	text := eval[string](t, b, `document.querySelector("#validation").textContent`)
	for _, want := range []string{"✗ failed", "failed: " + ruby, "Slim the base image", "depsd-validate-"} {
		if !strings.Contains(text, want) {
			t.Errorf("the validation's page does not say %q:\n%s", want, text)
		}
	}
	if link := eval[string](t, b, fmt.Sprintf(`(document.querySelector('tr[data-member=%q] a[href*="/pipelines/"]') || {}).href || ""`, ruby)); !strings.Contains(link, fmt.Sprint(rubyPl)) {
		t.Errorf("ruby's pipeline linked as %q, want pipeline %d", link, rubyPl)
	}
	b.screenshot(t, "validation", true)

	b.open(t, s.url+"/validations")
	row := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-mr="%s!%d"]').textContent`, base, iid))
	for _, want := range []string{fmt.Sprint(id), "failed", ruby} {
		if !strings.Contains(row, want) {
			t.Errorf("the list's row does not say %q: %s", want, row)
		}
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// waitValidation waits for depsd's validation pipeline of project and
// returns its id.
func waitValidation(t *testing.T, srv *gitlabtest.Server, project string) int64 {
	t.Helper()
	var id int64
	waitUntil(t, "a validation pipeline of "+project, func() bool {
		for _, p := range srv.Pipelines(project) {
			if p.Source == "api" && p.Variables[chain.VarValidate] == "1" {
				id = p.ID
			}
		}
		return id != 0
	})
	return id
}

// waitUntil polls cond until it holds or the page timeout passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
