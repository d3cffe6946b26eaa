package gitlab

import (
	"context"
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// A rebuild estimate reads GitLab's `duration` of the recent successful
// default-branch pipelines: failed ones, other branches and running ones do
// not count, and the newest come first.
func TestSuccessfulDurations(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM x\n"}}))
	if err := srv.CreateBranch("g/app", "dev"); err != nil {
		t.Fatal(err)
	}
	start := clk.Now().Add(-time.Hour)
	past := func(ref, status string, at, took time.Duration) {
		t.Helper()
		if _, err := srv.AddPastPipeline("g/app", ref, "push", status, start.Add(at), start.Add(at+took)); err != nil {
			t.Fatal(err)
		}
	}
	past("main", "success", 0, 90*time.Second)
	past("main", "success", time.Minute, 150*time.Second+400*time.Millisecond) // GitLab counts whole seconds
	past("main", "failed", 2*time.Minute, 10*time.Second)
	past("dev", "success", 3*time.Minute, 5*time.Second)
	past("main", "success", 4*time.Minute, 200*time.Second)
	must(srv.AddPipeline("g/app", "main", "push", "running"))

	c, _ := newClient(t, srv, nil)
	got, err := c.SuccessfulDurations(context.Background(), id, "main", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{200 * time.Second, 150 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("durations = %v, want %v", got, want)
	}
	none, err := c.SuccessfulDurations(context.Background(), id, "nope", 3)
	if err != nil || len(none) != 0 {
		t.Errorf("no history: %v, %v", none, err)
	}
	if _, err := srv.AddPastPipeline("g/app", "main", "push", "success", start.Add(time.Minute), start); err == nil {
		t.Error("a pipeline ending before it started was accepted")
	}
	if _, err := srv.AddPastPipeline("g/app", "main", "push", "running", start, start); err == nil {
		t.Error("an unfinished past pipeline was accepted")
	}
}
