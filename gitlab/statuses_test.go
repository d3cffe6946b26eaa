package gitlab

import (
	"context"
	"errors"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// A chain's status on the base commit moves pending, running, success
// through the client; a repeated running is ErrStatusTransition
// (permanent, not retried); a Reporter's token is ErrForbidden; the
// statuses read back as GitLab lists them.
func TestSetCommitStatus(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM scratch\n"}}))
	info, _ := srv.Project("g/base")
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()

	var last CommitStatus
	for _, state := range []string{"pending", "running", "success"} {
		st, err := c.SetCommitStatus(ctx, id, info.HeadCommit, StatusOptions{State: state, Name: "depsd/chain", Ref: "main",
			TargetURL: "https://depsd.example/chains/7", Description: "12 of 14 rebuilt"})
		if err != nil {
			t.Fatalf("%s: %v", state, err)
		}
		if st.Status != state || st.Name != "depsd/chain" || st.Author != gitlabtest.TokenUsername {
			t.Fatalf("%s: got %+v", state, st)
		}
		last = st
	}
	pls := srv.Pipelines("g/base")
	if len(pls) != 1 || pls[0].Source != "external" || pls[0].Status != "success" || pls[0].ID != last.PipelineID {
		t.Fatalf("pipelines %+v: want the external pipeline, success", pls)
	}

	// A new status after success; running twice is refused.
	if _, err := c.SetCommitStatus(ctx, id, info.HeadCommit, StatusOptions{State: "running", Name: "depsd/chain", Ref: "main"}); err != nil {
		t.Fatal(err)
	}
	before := c.Requests()
	_, err := c.SetCommitStatus(ctx, id, info.HeadCommit, StatusOptions{State: "running", Name: "depsd/chain", Ref: "main"})
	if !errors.Is(err, ErrStatusTransition) || !IsPermanent(err) || IsRetryable(err) || c.Requests()-before != 1 {
		t.Fatalf("running twice: %v (permanent %t, %d requests), want ErrStatusTransition, sent once", err, IsPermanent(err), c.Requests()-before)
	}

	got, err := c.ListCommitStatuses(ctx, id, info.HeadCommit, StatusFilter{Name: "depsd/chain"})
	if err != nil || len(got) != 1 || got[0].Status != "running" {
		t.Fatalf("latest statuses %+v %v: want the one running", got, err)
	}
	all, err := c.ListCommitStatuses(ctx, id, info.HeadCommit, StatusFilter{All: true})
	if err != nil || len(all) != 2 || all[0].Status != "success" || all[0].TargetURL != "https://depsd.example/chains/7" {
		t.Fatalf("all statuses %+v %v", all, err)
	}
	if _, err := c.ListCommitStatuses(ctx, id, "0000000000000000000000000000000000000000", StatusFilter{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown commit: %v, want ErrNotFound", err)
	}

	rep := must(srv.AddUser("rep"))
	if err := srv.AddMember("g/base", "rep", gitlabtest.AccessReporter); err != nil {
		t.Fatal(err)
	}
	rc, err := c.WithToken(rep.Token, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.SetCommitStatus(ctx, id, info.HeadCommit, StatusOptions{State: "pending", Name: "x"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("reporter: %v, want ErrForbidden", err)
	}
	if _, err := rc.ListCommitStatuses(ctx, id, info.HeadCommit, StatusFilter{}); err != nil {
		t.Fatalf("reporter reads: %v", err)
	}
}
