package gitlab

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// pinsProject is apps/shop with a depsd/pins branch moving its pin, the
// token's user a Maintainer.
func pinsProject(t *testing.T, b gitlabtest.Behavior) (*gitlabtest.Server, *Client, int64) {
	t.Helper()
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "apps/shop", Files: map[string]string{"Containerfile": "FROM ruby@sha256:aaa\n"},
		CI: gitlabtest.CISettings{TokenRole: gitlabtest.RoleMaintainer}}))
	if err := srv.SetPipelineBehavior("apps/shop", b); err != nil {
		t.Fatal(err)
	}
	c, _ := newClient(t, srv, nil)
	if _, err := c.CreateCommit(context.Background(), id, CommitRequest{Branch: "depsd/pins", StartBranch: "main", Message: "Move the ruby pin",
		Actions: []CommitAction{{Action: ActionUpdate, Path: "Containerfile", Content: "FROM ruby@sha256:bbb\n"}}}); err != nil {
		t.Fatal(err)
	}
	return srv, c, id
}

// Merge requests through the client: open (and the conflict of a second),
// list by source branch and state, get with its head pipeline, update,
// close and reopen, merge now with the source branch removed, and the
// refusals: ErrNotMergeable for a merged one, ErrConflict for a stale sha,
// ErrForbidden for a Developer merging into a protected branch.
func TestMergeRequests(t *testing.T) {
	srv, c, id := pinsProject(t, gitlabtest.Behavior{OnMergeRequest: true})
	ctx := context.Background()
	head := srv.Branches("apps/shop")["depsd/pins"]
	mr, err := c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "depsd/pins", TargetBranch: "main",
		Title: "Move pins", Description: "chain 7", Labels: []string{"depsd"}, RemoveSourceBranch: true})
	if err != nil || mr.IID != 1 || mr.State != MergeRequestOpened || mr.SHA != head || !slices.Equal(mr.Labels, []string{"depsd"}) ||
		!mr.RemoveSourceBranch || mr.HeadPipeline == nil || mr.HeadPipeline.Source != "merge_request_event" || mr.DetailedMergeStatus != "mergeable" ||
		!strings.HasSuffix(mr.WebURL, "/apps/shop/-/merge_requests/1") {
		t.Fatalf("CreateMergeRequest = %+v, %v", mr, err)
	}
	_, err = c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "depsd/pins", TargetBranch: "main", Title: "again"})
	if !errors.Is(err, ErrConflict) || !strings.HasSuffix(err.Error(), "409 Conflict: Another open merge request already exists for this source branch: !1") {
		t.Fatalf("a second open merge request: %v", err)
	}
	if _, err := c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "nope", TargetBranch: "main", Title: "x"}); !IsPermanent(err) ||
		!strings.Contains(err.Error(), "source_branch: does not exist") {
		t.Fatalf("a missing source branch: %v", err)
	}

	list, err := c.ListMergeRequests(ctx, id, MergeRequestFilter{SourceBranch: "depsd/pins", State: MergeRequestOpened})
	if err != nil || len(list) != 1 || list[0].IID != 1 || list[0].HeadPipeline != nil {
		t.Fatalf("ListMergeRequests = %+v, %v", list, err)
	}
	if list, err := c.ListMergeRequests(ctx, id, MergeRequestFilter{Labels: []string{"depsd", "other"}}); err != nil || len(list) != 0 {
		t.Fatalf("ListMergeRequests(labels depsd, other) = %+v, %v", list, err)
	}
	title, labels := "Move 2 pins", []string{"depsd", "pins"}
	if mr, err := c.UpdateMergeRequest(ctx, id, 1, MergeRequestUpdate{Title: &title, Labels: &labels}); err != nil || mr.Title != title || !slices.Equal(mr.Labels, labels) || mr.Description != "chain 7" {
		t.Fatalf("UpdateMergeRequest = %+v, %v", mr, err)
	}
	if mr, err := c.CloseMergeRequest(ctx, id, 1); err != nil || mr.State != MergeRequestClosed || mr.ClosedAt.IsZero() {
		t.Fatalf("CloseMergeRequest = %+v, %v", mr, err)
	}
	if mr, err := c.ReopenMergeRequest(ctx, id, 1); err != nil || mr.State != MergeRequestOpened {
		t.Fatalf("ReopenMergeRequest = %+v, %v", mr, err)
	}
	if _, err := c.MergeMergeRequest(ctx, id, 1, MergeOptions{SHA: srv.Branches("apps/shop")["main"]}); !errors.Is(err, ErrConflict) {
		t.Fatalf("merge with a stale sha: %v", err)
	}
	mr, err = c.MergeMergeRequest(ctx, id, 1, MergeOptions{SHA: head})
	if err != nil || mr.State != MergeRequestMerged || mr.MergeCommitSHA != srv.Branches("apps/shop")["main"] || mr.MergedAt.IsZero() {
		t.Fatalf("MergeMergeRequest = %+v, %v", mr, err)
	}
	if _, ok := srv.Branches("apps/shop")["depsd/pins"]; ok {
		t.Fatal("the source branch is still there")
	}
	if _, err := c.MergeMergeRequest(ctx, id, 1, MergeOptions{}); !errors.Is(err, ErrNotMergeable) || !IsPermanent(err) {
		t.Fatalf("merge a merged one: %v", err)
	}
	if got, err := c.GetMergeRequest(ctx, id, 1); err != nil || got.State != MergeRequestMerged {
		t.Fatalf("GetMergeRequest = %+v, %v", got, err)
	}
	if _, err := c.GetMergeRequest(ctx, id, 9); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetMergeRequest(9): %v", err)
	}

	// A Developer may open one but not merge it into protected main: 401
	// from GitLab, which is no token problem.
	if err := srv.SetCISettings("apps/shop", gitlabtest.CISettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBranch(ctx, id, "dev", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCommit(ctx, id, CommitRequest{Branch: "dev", Message: "m", Actions: []CommitAction{{Action: ActionCreate, Path: "x", Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	mr = must(c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "dev", TargetBranch: "main", Title: "dev"}))
	if _, err := c.MergeMergeRequest(ctx, id, mr.IID, MergeOptions{}); !errors.Is(err, ErrForbidden) || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a Developer's merge into main: %v", err)
	}
}

// Auto-merge through the client: set while the merge request pipeline
// runs, merged by GitLab once it succeeds, with the target branch's
// pipeline on the merge commit; ErrNotMergeable without a pipeline to
// wait for.
func TestAutoMerge(t *testing.T) {
	srv, c, id := pinsProject(t, gitlabtest.Behavior{OnPush: true, OnMergeRequest: true})
	ctx := context.Background()
	mr := must(c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "depsd/pins", TargetBranch: "main", Title: "Move pins"}))
	mr, err := c.MergeMergeRequest(ctx, id, mr.IID, MergeOptions{AutoMerge: true, SHA: mr.SHA})
	if err != nil || !mr.AutoMerge || mr.State != MergeRequestOpened {
		t.Fatalf("auto-merge = %+v, %v", mr, err)
	}
	if err := srv.SetPipelineStatus(mr.HeadPipeline.ID, "success"); err != nil {
		t.Fatal(err)
	}
	mr = must(c.GetMergeRequest(ctx, id, mr.IID))
	pls := must(c.ListPipelines(ctx, id, PipelineFilter{Ref: "main", Source: "any"}))
	if mr.State != MergeRequestMerged || mr.AutoMerge || len(pls) != 1 || pls[0].SHA != mr.MergeCommitSHA {
		t.Fatalf("after the pipeline: %+v, main's pipelines %+v", mr, pls)
	}

	// No pipeline for the head (a project without merge request
	// pipelines): nothing to wait for.
	if err := srv.SetPipelineBehavior("apps/shop", gitlabtest.Behavior{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBranch(ctx, id, "next", "main"); err != nil {
		t.Fatal(err)
	}
	mustDo(srv.SetFileOn("apps/shop", "next", "Containerfile", "FROM ruby@sha256:ccc\n"))
	mr = must(c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "next", TargetBranch: "main", Title: "next"}))
	if _, err := c.MergeMergeRequest(ctx, id, mr.IID, MergeOptions{AutoMerge: true}); !errors.Is(err, ErrNotMergeable) {
		t.Fatalf("auto-merge without a pipeline: %v", err)
	}
}

// Notes through the client: create, update, list oldest first with
// GitLab's system notes among them; a system note cannot be edited.
func TestMergeRequestNotes(t *testing.T) {
	srv, c, id := pinsProject(t, gitlabtest.Behavior{})
	ctx := context.Background()
	mr := must(c.CreateMergeRequest(ctx, id, NewMergeRequest{SourceBranch: "depsd/pins", TargetBranch: "main", Title: "Validate"}))
	n, err := c.CreateMergeRequestNote(ctx, id, mr.IID, "| dependent | result |")
	if err != nil || n.ID == 0 || n.Author != gitlabtest.TokenUsername || n.System {
		t.Fatalf("CreateMergeRequestNote = %+v, %v", n, err)
	}
	mustDo(srv.PushToMR("apps/shop", mr.IID, "README.md", "x"))
	if n, err = c.UpdateMergeRequestNote(ctx, id, mr.IID, n.ID, "| dependent | result |\n| ruby | success |"); err != nil || !strings.Contains(n.Body, "ruby") {
		t.Fatalf("UpdateMergeRequestNote = %+v, %v", n, err)
	}
	notes, err := c.ListMergeRequestNotes(ctx, id, mr.IID)
	if err != nil || len(notes) != 2 || notes[0].ID != n.ID || notes[0].Body != n.Body || !notes[1].System {
		t.Fatalf("ListMergeRequestNotes = %+v, %v", notes, err)
	}
	if _, err := c.UpdateMergeRequestNote(ctx, id, mr.IID, notes[1].ID, "x"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("edit a system note: %v", err)
	}
	if _, err := c.UpdateMergeRequestNote(ctx, id, mr.IID, 999999, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("edit a missing note: %v", err)
	}
}
