package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
)

// TestPremergeRoundTrip: what validations keep is stored and read back as
// written, on both backends: a validation chain's kind and what it
// validates, a validation action's payload (claimed after every other
// action due), a status's name, a merge request's record (found due for
// each kind of work, and when its next work falls due), branch
// candidates, and how a node names an upstream in its files.
func TestPremergeRoundTrip(t *testing.T) { forEachBackend(t, testPremergeRoundTrip) }

func testPremergeRoundTrip(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	val := &chain.Validation{ProjectID: 10, IID: 4, Title: "Slim", URL: "https://x/mr/4", SourceBranch: "slim", TargetBranch: "main",
		SHA: "c0ffee", PipelineID: 77, PipelineURL: "https://x/p/77", Candidate: "registry.example.com/group/base:mr-4",
		Digest: "sha256:aaa", Depth: chain.DepthAll}
	c := &chain.Chain{ID: 5, Mode: chain.Full, Kind: chain.KindValidation, Validation: val, State: chain.Running,
		Roots: []string{"group/base"}, StartedAt: t0, UpdatedAt: t0,
		Reasons: []chain.Reason{{Kind: chain.ReasonMergeRequest, Project: "group/base", PipelineID: 77, Detail: "mr", At: t0}},
		Members: []*chain.Member{
			{Project: "group/app", ProjectID: 20, State: chain.Pending, Upstreams: []string{"group/base"}, ActionID: "a-v"},
			{Project: "group/base", ProjectID: 10, State: chain.Success, PipelineID: 77, FinishedAt: t0,
				Images: map[string]string{"registry.example.com/group/base:mr-4": "sha256:aaa"}},
		}}
	release := &chain.Chain{ID: 6, Mode: chain.Full, State: chain.Running, Roots: []string{"group/base"}, StartedAt: t0, UpdatedAt: t0}
	validate := chain.Action{ID: "a-v", Kind: chain.ActionValidate, ChainID: 5, Project: "group/app", ProjectID: 20, Ref: "master",
		Upstreams: []string{"group/base"}, State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0,
		Validate: &chain.ValidateRequest{BuildContexts: "${BASE}=docker-image://registry.example.com/group/base@sha256:aaa", Tag: "depsd-validate-5"}}
	// Due later than the validation's, yet claimed first.
	rebuild := chain.Action{ID: "a-r", ChainID: 6, Project: "group/app", ProjectID: 20, Ref: "master", State: chain.ActionPending,
		NextAttemptAt: t0.Add(time.Second), CreatedAt: t0}
	mr := chain.MRValidation{ProjectID: 10, IID: 4, Project: "group/base", Title: "Slim", URL: "https://x/mr/4", SourceBranch: "slim",
		TargetBranch: "main", State: chain.MROpened, HeadSHA: "c0ffee", PipelineID: 77, PipelineURL: "https://x/p/77",
		PipelineStatus: "success", ChainID: 5, Validated: 77, Chains: []int64{3, 5},
		Note:        chain.NoteSend{ID: 9, Want: "table", WantSeq: 2, DoneSeq: 1, NextSendAt: t0.Add(time.Minute)},
		Cleanup:     []chain.TagCleanup{{ProjectID: 10, Project: "group/base", Image: "registry.example.com/group/base:mr-4"}},
		NextCheckAt: t0.Add(time.Hour), Attempts: 1, LastError: "boom", CreatedAt: t0, UpdatedAt: t0.Add(time.Second)}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		for _, x := range []*chain.Chain{c, release} {
			if err := tx.SaveChain(ctx, x); err != nil {
				return err
			}
		}
		for _, a := range []chain.Action{validate, rebuild} {
			if err := tx.AddAction(ctx, a); err != nil {
				return err
			}
		}
		if err := tx.AddChainStatus(ctx, chain.ChainStatus{PipelineID: 77, Name: chain.ValidationStatusName, ProjectID: 10,
			Project: "group/base", SHA: "c0ffee", ChainID: 5, CreatedAt: t0, NextSendAt: t0}); err != nil {
			return err
		}
		if err := tx.SaveMRValidation(ctx, mr); err != nil {
			return err
		}
		return tx.QueueBranchCandidate(ctx, chain.BranchCandidate{ProjectID: 10, Project: "group/base", Branch: "slim",
			SHA: "c0ffee", PipelineID: 78, PipelineURL: "https://x/p/78", QueuedAt: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		got, err := tx.Chain(ctx, 5)
		if err != nil {
			return err
		}
		if got.Kind != chain.KindValidation || !reflect.DeepEqual(got.Validation, val) || got.Reasons[0].Kind != chain.ReasonMergeRequest {
			t.Errorf("validation chain: kind %q, %+v, %+v", got.Kind, got.Validation, got.Reasons)
		}
		for _, f := range []chain.Filter{{}, {Kind: chain.KindRelease}} {
			if list, err := tx.Chains(ctx, f); err != nil || len(list) != 1 || list[0].ID != 6 {
				t.Errorf("release chains (%+v): %d, %v; want chain 6 alone", f, len(list), err)
			}
		}
		if list, err := tx.Chains(ctx, chain.Filter{Kind: chain.KindValidation}); err != nil || len(list) != 1 || list[0].ID != 5 {
			t.Errorf("validation chains: %d, %v; want chain 5 alone", len(list), err)
		}
		a, ok, err := tx.Action(ctx, "a-v")
		if err != nil || !ok || !reflect.DeepEqual(a.Validate, validate.Validate) || a.Kind != chain.ActionValidate {
			t.Errorf("validation action: %+v, %v, %v", a, ok, err)
		}
		due, ok, err := tx.DueAction(ctx, t0.Add(time.Minute))
		if err != nil || !ok || due.ID != "a-r" {
			t.Errorf("due first: %s, %v, %v; want the release action a-r before the validation's", due.ID, ok, err)
		}
		st, ok, err := tx.ChainStatus(ctx, 77)
		if err != nil || !ok || st.Name != chain.ValidationStatusName {
			t.Errorf("status: %+v, %v, %v", st, ok, err)
		}
		gotMR, ok, err := tx.MRValidation(ctx, 10, 4)
		if err != nil || !ok {
			t.Fatalf("merge request: %v, %v", ok, err)
		}
		if !reflect.DeepEqual(gotMR, mr) {
			t.Errorf("merge request round trip:\n got %+v\nwant %+v", gotMR, mr)
		}
		for _, tc := range []struct {
			at   time.Time
			want int
		}{{t0, 0}, {t0.Add(time.Minute), 1}, {t0.Add(2 * time.Hour), 1}} {
			list, err := tx.MRValidations(ctx, chain.MRFilter{Due: true, Now: tc.at})
			if err != nil || len(list) != tc.want {
				t.Errorf("due at %s: %d, %v; want %d", tc.at, len(list), err, tc.want)
			}
		}
		if next, ok, err := tx.NextMRValidationDue(ctx); err != nil || !ok || !next.Equal(t0.Add(time.Minute)) {
			t.Errorf("next due: %s, %v, %v; want the note's %s", next, ok, err, t0.Add(time.Minute))
		}
		bcs, err := tx.BranchCandidates(ctx, 10)
		if err != nil || len(bcs) != 1 || bcs[0].Branch != "slim" || bcs[0].PipelineID != 78 || !bcs[0].QueuedAt.Equal(t0) {
			t.Errorf("branch candidates: %+v, %v", bcs, err)
		}
		refs, err := tx.UpstreamRefs(ctx, "group/app", "group/base")
		if err != nil || len(refs) != 1 || refs[0].Ref != "${BASE}" {
			t.Errorf("how group/app names group/base: %+v, %v", refs, err)
		}
		if refs, err := tx.UpstreamRefs(ctx, "group/app", "group/tools"); err != nil || len(refs) != 1 || refs[0].Ref != "group/tools" {
			t.Errorf("how group/app names group/tools: %+v, %v", refs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Done: no work is due any more; a branch candidate leaves its queue.
	err = s.UpdateChains(ctx, func(tx chain.Tx) error {
		mr.Note.DoneSeq, mr.State, mr.Cleanup[0].Done = 2, chain.MRMerged, true
		if err := tx.SaveMRValidation(ctx, mr); err != nil {
			return err
		}
		return tx.DoneBranchCandidate(ctx, 78)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		if list, err := tx.MRValidations(ctx, chain.MRFilter{Due: true, Now: t0.Add(24 * time.Hour)}); err != nil || len(list) != 0 {
			t.Errorf("due once merged and cleaned up: %d, %v", len(list), err)
		}
		if _, ok, err := tx.NextMRValidationDue(ctx); err != nil || ok {
			t.Errorf("next due with nothing to do: %v, %v", ok, err)
		}
		if bcs, err := tx.BranchCandidates(ctx, 10); err != nil || len(bcs) != 0 {
			t.Errorf("branch candidates after done: %+v, %v", bcs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A merge request note claimed by a process whose liveness lease ran out
// is due again before the claim's own lease ends (as an action's claim,
// TestClaimOfADeadOwnerIsVoid); one claimed by a live process is not.
func TestNoteClaimOfADeadOwnerIsVoid(t *testing.T) {
	forEachBackend(t, testNoteClaimOfADeadOwnerIsVoid)
}

func testNoteClaimOfADeadOwnerIsVoid(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	if _, err := s.TryLease(ctx, "alive:r1/x", "r1/x", t0, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	v := chain.MRValidation{ProjectID: 10, IID: 4, Project: "group/base", State: chain.MROpened, NextCheckAt: t0.Add(time.Hour),
		CreatedAt: t0, UpdatedAt: t0, Note: chain.NoteSend{Want: "note", WantSeq: 2, DoneSeq: 1, Doubt: true, NextSendAt: t0,
			LeaseUntil: t0.Add(5 * time.Minute), ClaimedBy: "r1/x"}}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		if err := tx.SaveMRValidation(ctx, v); err != nil {
			return err
		}
		due := func(at time.Time) bool {
			list, err := tx.MRValidations(ctx, chain.MRFilter{Due: true, Now: at})
			if err != nil {
				t.Fatal(err)
			}
			return len(list) == 1
		}
		if due(t0.Add(10 * time.Second)) {
			t.Error("the note claim of a live process was taken over")
		}
		if !due(t0.Add(15 * time.Second)) {
			t.Error("the note claim of a dead process is not due before its lease ends")
		}
		for at, want := range map[time.Time]bool{t0.Add(10 * time.Second): true, t0.Add(15 * time.Second): false} {
			if alive, err := tx.OwnerAlive(ctx, "r1/x", at); err != nil || alive != want {
				t.Errorf("OwnerAlive at %s = %v, %v; want %v", at, alive, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
