package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/verify"
)

// TestPinnedUpstreamIsNeverJudgedFresh reproduces the false "fresh" of
// issue 38: g/app pins g/ruby by digest (directly, with or without the
// tag, or through an ARG default), so its pipelines build on the pinned,
// older ruby whatever ruby publishes now. After ruby moves, app's image
// must be judged against ruby's current published image, never against
// the digest its Containerfile names: it is pinned (built on the pin, not
// on ruby's current image), not fresh, and not stale either (no rebuild
// without cache). The chain does not rebuild app: it waits for the merge
// request moving the pin, which the freshness row names.
func TestPinnedUpstreamIsNeverJudgedFresh(t *testing.T) {
	host := registrytest.Start(t)
	ruby := host + "/g/ruby:latest"
	old := registrytest.Push(t, ruby) // ruby's image before this chain
	for name, containerfile := range map[string]string{
		"tag and digest": "FROM " + ruby + "@" + old + "\n",
		"digest alone":   "FROM " + host + "/g/ruby@" + old + "\n",
		"ARG default":    "ARG RUBY=" + host + "/g/ruby@" + old + "\n# the pin moves in review\nFROM ${RUBY}\n",
	} {
		t.Run(name, func(t *testing.T) {
			srv := testGitLab(t, gitlabtest.Options{RegistryHost: host,
				Pipelines: gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}},
				map[string]string{"g/ruby": "FROM scratch\n", "g/app": containerfile, "g/web": "FROM " + host + "/g/app:latest\n"})
			d, ctx := runVerifying(t, srv, map[string]gitlabtest.Images{
				"g/ruby": {Refs: []string{ruby}},
				// Built as the pin says: on ruby's old image, annotated.
				"g/app": {From: host + "/g/ruby@" + old, Annotate: true},
			})
			var id int64
			var err error
			eventually(t, "the rebuild to be accepted", func() bool {
				id, err = d.Engine().Rebuild(ctx, "g/ruby", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
				return err == nil
			})
			// app pins ruby: once ruby's new image is verified, app gets
			// a merge request moving its pin, not a rebuild.
			var v chain.ChainView
			eventually(t, "app to wait for its pin merge request", func() bool {
				v, err = d.Engine().Chain(ctx, id)
				ok := err == nil && memberOf(v, "g/app").State == chain.WaitingMerge && memberOf(v, "g/app").MergeRequest != ""
				if !ok && memberOf(v, "g/app").State == chain.MemberSkipped {
					t.Fatalf("app skipped: %+v", memberOf(v, "g/app"))
				}
				return ok
			})
			// Someone builds app's main as it is, on the pin: its success
			// is verified (for the record) and changes nothing of the chain.
			plID, err := srv.RunPipeline("g/app", "", "push")
			if err != nil {
				t.Fatal(err)
			}
			var pl gitlabtest.Pipeline
			eventually(t, "app's pipeline to succeed", func() bool {
				for _, p := range srv.Pipelines("g/app") {
					if p.ID == plID {
						pl = p
					}
				}
				return pl.Status == "success"
			})
			info, _ := srv.Project("g/app")
			outcome, err := d.Engine().ApplyPipelineEvent(ctx, chain.PipelineEvent{ProjectID: info.ID, Project: "g/app", PipelineID: pl.ID,
				Status: "success", Ref: pl.Ref, SHA: pl.SHA, Source: pl.Source})
			if err != nil || !strings.HasPrefix(outcome, "held") {
				t.Fatalf("app's own success: %q, %v; want held while its pin merge request is open", outcome, err)
			}
			eventually(t, "app's image to be verified", func() bool {
				records, err := d.store.Verifications(ctx, "g/app")
				return err == nil && len(records) == 1
			})
			if v, err = d.Engine().Chain(ctx, id); err != nil {
				t.Fatal(err)
			}
			current := ""
			for _, p := range srv.PublishedImages() {
				if p.Project == "g/ruby" {
					current = p.Digest
				}
			}
			if current == "" || current == old {
				t.Fatalf("ruby did not move: %s", current)
			}
			records, err := d.store.Verifications(ctx, "g/app")
			if err != nil || len(records) != 1 {
				t.Fatalf("stored verifications of g/app = %+v, %v", records, err)
			}
			res := records[0].Result
			if res.State != verify.StatePinned || len(res.Upstreams) != 1 {
				t.Fatalf("g/app judged %s (%s) against %+v: want pinned, built on the pin %s while ruby is %s", res.State, res.Detail, res.Upstreams, old, current)
			}
			if up := res.Upstreams[0]; up.Upstream != ruby || up.Current != current || up.BuiltOn != old || up.Pin != old {
				t.Errorf("g/app's verdict %+v: want judged against %s (current %s), built on the pin %s", up, ruby, current, old)
			}
			if m := memberOf(v, "g/app"); m.State != chain.WaitingMerge || m.NoCache || m.Builds != 0 {
				t.Errorf("g/app member %+v: want waiting for its merge request, never rebuilt (with or without cache)", m)
			}
			if v.State != chain.Running {
				t.Errorf("chain %s: it waits for app's merge request; members %+v", v.State, v.Members)
			}
			rep, err := d.freshness(ctx, FreshnessQuery{Projects: []string{"g/app"}})
			if err != nil || len(rep.Images) != 1 || rep.Images[0].State != verify.StatePinned {
				t.Errorf("depsd freshness for g/app = %+v, %v: want pinned", rep, err)
			}
			if got := fmt.Sprint(rep.Images[0].Upstreams); !strings.Contains(got, old) {
				t.Errorf("freshness row's upstreams %s do not name the pin %s", got, old)
			}
			if f := rep.Images[0].Fix; f == nil || f.Kind != verify.FixMergeRequest || f.URL != memberOf(v, "g/app").MergeRequest {
				t.Errorf("freshness row's fix %+v: want the merge request moving the pin", f)
			}
		})
	}
}

// memberOf returns project's member of v.
func memberOf(v chain.ChainView, project string) chain.MemberView {
	for _, m := range v.Members {
		if m.Project == project {
			return m
		}
	}
	return chain.MemberView{}
}
