package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// TestRealValidation: validation before the merge for real (make
// e2e-real). Once the real chain built every image, premerge covers base
// (depth all). A merge request of base drops /etc/base-version, which
// ruby's build reads: its merge request pipeline, a real job of the build
// component, pushes the candidate :mr-<iid>; depsd builds ruby, left and
// right on it and bottom on left's and right's validation images, each a
// real job of the component that publishes nothing. ruby fails because of
// the change, app below it is not built; the status depsd/dependents is
// failed and the note names ruby with its pipeline. Closing the merge
// request deletes the candidate and the validation tags.
func TestRealValidation(t *testing.T) {
	rc := startRealChain(t)
	rc.assertChain(rc.runChain("v2", nil))
	latest := map[string]string{}
	for _, p := range append([]string{rcBase}, rcDownstream...) {
		latest[p] = rc.digest(p)
	}
	chainsBefore, err := rc.w.chains()
	if err != nil {
		t.Fatal(err)
	}

	// Everyone who sees base sees the others: the note names them.
	for _, p := range append([]string{rcBase}, rcDownstream...) {
		if err := rc.srv.SetVisibility(p, "internal"); err != nil {
			t.Fatal(err)
		}
	}
	// depsd again, with premerge on base.
	rc.setup.configure(t, "gitlab:\n  requests_per_minute: 60000\n  commit_status_interval: 1s\nimages:\n  verify: enforce\n  publish: [\"{registry}/{path}:latest\"]\n"+
		"  insecure_registries: [\""+rc.reg+"\"]\nhooks:\n  url: http://"+rc.setup.listen+"/hooks/gitlab\npremerge:\n  - projects: ["+rcBase+"]\n    depth: all\n")
	if err := rc.serve.signal(t, syscall.SIGTERM, stepTimeout); err != nil {
		t.Fatalf("depsd serve on SIGTERM: %v", err)
	}
	rc.serve = rc.setup.start(t)

	// The change, on a branch (no branch pipeline: base runs merge
	// request pipelines), then its merge request.
	if err := rc.srv.SetPipelineBehavior(rcBase, gitlabtest.Behavior{Jobs: true, OnMergeRequest: true}); err != nil {
		t.Fatal(err)
	}
	if err := rc.srv.CreateBranch(rcBase, "slim"); err != nil {
		t.Fatal(err)
	}
	slim := fmt.Sprintf("FROM %s/ext/busybox:latest\nRUN echo slim > /etc/base-flavour\n", rc.reg)
	if _, err := rc.srv.SetFileOn(rcBase, "slim", "Containerfile", slim); err != nil {
		t.Fatal(err)
	}
	iid, err := rc.srv.OpenMR(rcBase, "slim", "main", "Slim the base: no /etc/base-version")
	if err != nil {
		t.Fatal(err)
	}
	var mrp gitlabtest.Pipeline
	for _, p := range rc.srv.Pipelines(rcBase) {
		if p.MergeRequestIID == iid {
			mrp = p
		}
	}
	if mrp.ID == 0 {
		t.Fatal("the merge request started no pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	candTag := fmt.Sprintf("%s/%s:mr-%d", rc.reg, rcBase, iid)
	rc.w.waitUntil("the merge request pipeline pushed the candidate", realTimeout, func() bool {
		for _, p := range rc.srv.Pipelines(rcBase) {
			if p.ID == mrp.ID && (p.Status == "failed" || p.Status == "canceled") {
				t.Fatalf("merge request pipeline %s\n%s", p.Status, rc.jobLog(p.ID))
			}
		}
		_, err := rc.rdr.Digest(ctx, candTag)
		return err == nil
	})
	cand, err := rc.rdr.Digest(ctx, candTag)
	if err != nil {
		t.Fatal(err)
	}

	// The validation ends: ruby broken by the change, the others built.
	var v chain.ValidationView
	rc.w.waitUntil("the validation ended", realTimeout, func() bool {
		resp, err := rc.w.client.Get(rc.w.url + "/api/v1/validations")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct{ Validations []chain.ValidationView }
		if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Validations) != 1 || body.Validations[0].Chain == nil {
			return false
		}
		v = body.Validations[0]
		return !v.Chain.State.Active()
	})
	if v.Result != chain.CommitFailed || v.Chain.Validation.Digest != cand {
		t.Errorf("validation %s (%s) on %s: want failed, on the candidate %s", v.Result, v.Summary, v.Chain.Validation.Digest, cand)
	}
	validations := func(p string) []gitlabtest.Pipeline {
		var out []gitlabtest.Pipeline
		for _, pl := range rc.srv.Pipelines(p) {
			if pl.Source == "api" && pl.Variables[chain.VarValidate] == "1" {
				out = append(out, pl)
			}
		}
		return out
	}
	want := map[string]chain.MemberState{rcRuby: chain.Failed, rcLeft: chain.Success, rcRight: chain.Success, rcBottom: chain.Success, rcApp: chain.MemberBlocked}
	for p, st := range want {
		m, _ := member(*v.Chain, p)
		ps := validations(p)
		switch {
		case m.State != st:
			t.Errorf("%s %s (%s), want %s", p, m.State, m.Why, st)
		case st == chain.MemberBlocked && len(ps) != 0:
			t.Errorf("%s, below ruby, got %d validation pipelines", p, len(ps))
		case st != chain.MemberBlocked && (len(ps) != 1 || m.PipelineID != ps[0].ID):
			t.Errorf("%s: validation pipelines %d (member's %d), want one", p, len(ps), m.PipelineID)
		}
	}
	if ps := validations(rcRuby); len(ps) == 1 {
		log := rc.jobLog(ps[0].ID)
		if !strings.Contains(log, "base-version") {
			t.Errorf("ruby's validation did not fail on the change:\n%s", log)
		}
		lines := strings.Split(strings.TrimSpace(log), "\n")
		t.Logf("ruby's validation job, broken by the change (last lines):\n%s", strings.Join(lines[max(0, len(lines)-12):], "\n"))
	}
	if ps := validations(rcBottom); len(ps) == 1 {
		ctxs := ps[0].Variables[chain.VarBuildContexts]
		for _, up := range []string{rcLeft, rcRight} {
			if !strings.Contains(ctxs, "=docker-image://"+rc.reg+"/"+up+"@sha256:") {
				t.Errorf("bottom built on %q: want %s's validation image", ctxs, up)
			}
		}
	}
	// Nothing published, no release.
	for p, d := range latest {
		if got := rc.digest(p); got != d {
			t.Errorf("%s:latest moved from %s to %s: a candidate or a validation published", p, d, got)
		}
	}
	if cs, err := rc.w.chains(); err != nil || len(cs) != len(chainsBefore) {
		t.Errorf("chains %d (%v), before %d: a candidate is never a release", len(cs), err, len(chainsBefore))
	}
	// The answer on the merge request.
	rubyPl := validations(rcRuby)
	var note string
	named := eventually(2*stepTimeout, func() bool {
		for _, mr := range rc.srv.MergeRequests(rcBase) {
			for _, n := range mr.Notes {
				if strings.HasPrefix(n.Body, "<!-- depsd: validation of !") {
					note = n.Body
				}
			}
		}
		return len(rubyPl) == 1 && strings.Contains(note, rcRuby+" | **failed** | [#"+fmt.Sprint(rubyPl[0].ID)+"]")
	})
	if !named {
		t.Errorf("the note does not name ruby with its pipeline:\n%s", note)
	}
	var st gitlabtest.CommitStatus
	for _, s := range rc.srv.Statuses(rcBase, mrp.SHA) {
		if s.Name == chain.ValidationStatusName && s.PipelineID == mrp.ID {
			st = s
		}
	}
	if st.Status != "failed" || !strings.Contains(st.Description, "failed: "+rcRuby) {
		t.Errorf("status %+v: want failed naming ruby", st)
	}

	// Closed: the candidate and the validation images go.
	tags := []string{candTag}
	for _, p := range []string{rcLeft, rcRight} {
		if ps := validations(p); len(ps) == 1 && ps[0].Variables[chain.VarValidateTag] != "" {
			tags = append(tags, rc.reg+"/"+p+":"+ps[0].Variables[chain.VarValidateTag])
		} else {
			t.Errorf("%s, which bottom builds on, pushed no validation image", p)
		}
	}
	if err := rc.srv.CloseMR(rcBase, iid); err != nil {
		t.Fatal(err)
	}
	rc.w.waitUntil("the merge request's tags deleted", realTimeout, func() bool {
		for _, tag := range tags {
			if _, err := rc.rdr.Digest(ctx, tag); err == nil {
				return false
			}
		}
		return true
	})
	for p, d := range latest {
		if got := rc.digest(p); got != d {
			t.Errorf("%s:latest moved from %s to %s with the merge request's tags", p, d, got)
		}
	}
}
