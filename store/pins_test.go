package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// TestPinsRoundTrip: what moving pins keeps is stored and read back as
// written, on both backends: a member's pinned upstreams, the digests its
// verified build published, its merge request and merge commit; a pins
// action with what it moves and what its send did; the writes of a
// chain, in order; and each node's dependency file in the engine's view
// of a project.
func TestPinsRoundTrip(t *testing.T) { forEachBackend(t, testPinsRoundTrip) }

func testPinsRoundTrip(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	projects := sampleProjects()
	projects[1].Refs = []scan.Ref{{Node: "group/app@stable", Kind: deps.NodeBranch, Ref: "stable", File: "Containerfile.stable"}}
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	c := &chain.Chain{ID: 3, Mode: chain.Full, State: chain.Running, Roots: []string{"group/base"}, StartedAt: t0, UpdatedAt: t0,
		Members: []*chain.Member{
			{Project: "group/app", ProjectID: 20, State: chain.WaitingMerge, Upstreams: []string{"group/base"}, Pinned: []string{"group/base"},
				ActionID: "a-p", MergeRequest: "https://gitlab.example.com/group/app/-/merge_requests/4", MergeRequestIID: 4,
				MergeSHA: "5e1f", TriggeredAt: t0},
			{Project: "group/base", ProjectID: 10, State: chain.Success, PipelineID: 9, FinishedAt: t0, Verified: chain.ImageFresh,
				Images: map[string]string{"registry.example.com/group/base:latest": "sha256:aaa", "registry.example.com/group/base:3": "sha256:bbb"}},
		}}
	a := chain.Action{ID: "a-p", Kind: chain.ActionPins, ChainID: 3, Project: "group/app", ProjectID: 20, Ref: "master",
		Upstreams: []string{"group/base"}, State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0,
		Pins: &chain.PinsRequest{File: "Dockerfile", Default: true, Mode: chain.PinAutoMerge,
			Upstreams: []chain.PinUpstream{{Node: "group/base", Images: map[string]string{"registry.example.com/group/base:3": "sha256:bbb"}}}}}
	writes := []chain.Write{
		{ChainID: 3, At: t0, Project: "group/app", Kind: "commit", Ref: "depsd/pins", Detail: "commit 5e1f", URL: "https://x/c"},
		{ChainID: 3, At: t0.Add(time.Second), Project: "group/app", Kind: "merge-request", Ref: "depsd/pins", Detail: "opened !4", URL: "https://x/4"},
		{ChainID: 4, At: t0, Project: "group/app", Kind: "note", Detail: "another chain's"},
	}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		if err := tx.SaveChain(ctx, c); err != nil {
			return err
		}
		if err := tx.AddAction(ctx, a); err != nil {
			return err
		}
		for _, w := range writes {
			if err := tx.AddWrite(ctx, w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		got, err := tx.Chain(ctx, 3)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("chain round trip:\n got %+v\nwant %+v", got.Members[0], c.Members[0])
		}
		gotA, ok, err := tx.Action(ctx, "a-p")
		if err != nil || !ok || !reflect.DeepEqual(gotA, a) {
			t.Errorf("pins action round trip:\n got %+v (%+v)\nwant %+v (%+v), %v", gotA, gotA.Pins, a, a.Pins, err)
		}
		ws, err := tx.Writes(ctx, 3)
		if err != nil || !reflect.DeepEqual(ws, writes[:2]) {
			t.Errorf("Writes(3) = %+v, %v; want %+v", ws, err, writes[:2])
		}
		p, ok, err := tx.Project(ctx, "group/app")
		want := map[string]string{"group/app": "Dockerfile", "group/app@stable": "Containerfile.stable"}
		if err != nil || !ok || !reflect.DeepEqual(p.Files, want) {
			t.Errorf("Project(group/app).Files = %v, %v; want %v", p.Files, err, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The sent action keeps what its send did.
	a.State, a.PipelineURL = chain.ActionSent, "https://x/4"
	a.Pins.Done = &chain.PinsDone{MergeRequest: 4, URL: "https://x/4", Commit: "5e1f",
		Moved: []deps.PinMoved{{Repository: "registry.example.com/group/base", Tag: "3", From: "sha256:old", To: "sha256:bbb", Line: 2}}}
	err = s.UpdateChains(ctx, func(tx chain.Tx) error { return tx.UpdateAction(ctx, a) })
	if err != nil {
		t.Fatal(err)
	}
	s.ViewChains(ctx, func(tx chain.Tx) error {
		gotA, _, err := tx.Action(ctx, "a-p")
		if err != nil || !reflect.DeepEqual(gotA.Pins, a.Pins) {
			t.Errorf("sent pins action: %+v, %v; want %+v", gotA.Pins, err, a.Pins)
		}
		return nil
	})
}
