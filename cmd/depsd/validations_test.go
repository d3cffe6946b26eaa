package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// TestValidationsCommand: `depsd validations` lists the merge requests
// validated with their result; with a validation's ID or PROJECT!IID it
// shows the candidate and each dependent with its pipeline, result and
// the image it built; --json is the API's answer; a release chain's ID is
// no validation.
func TestValidationsCommand(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "depsd.db")
	t.Setenv("DEPSD_STATE", state)
	t.Setenv("DEPSD_CONFIG", "")
	t.Chdir(dir)
	if code, _, errOut := depsd(t, "validations"); code != exitFail || !strings.Contains(errOut, "run depsd scan first") {
		t.Errorf("before any state: exit %d, %s", code, errOut)
	}
	st, err := store.Open(t.Context(), state)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplyScan(t.Context(), []scan.Project{{ID: 1, Path: "g/base", DefaultBranch: "main"}}, scan.Meta{StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	err = st.UpdateChains(t.Context(), func(tx chain.Tx) error {
		c := &chain.Chain{ID: 7, Mode: chain.Full, Kind: chain.KindValidation, State: chain.Finished, Roots: []string{"g/base"},
			StartedAt: now, UpdatedAt: now, EndedAt: now,
			Validation: &chain.Validation{ProjectID: 1, IID: 3, Title: "Slim", SHA: "abcdef0123456789", PipelineID: 40,
				Candidate: "r/g/base:mr-3", Digest: "sha256:c", Depth: chain.DepthAll},
			Members: []*chain.Member{
				{Project: "g/base", State: chain.Success, PipelineID: 40, Images: map[string]string{"r/g/base:mr-3": "sha256:c"}},
				{Project: "g/python", State: chain.Success, PipelineID: 42, Upstreams: []string{"g/base"},
					Images: map[string]string{"r/g/python:depsd-validate-7": "sha256:p"}},
				{Project: "g/ruby", State: chain.Failed, PipelineID: 41, PipelineURL: "https://gl/g/ruby/-/pipelines/41", Upstreams: []string{"g/base"}, Why: "pipeline 41 failed"},
				{Project: "g/app", State: chain.MemberBlocked, Upstreams: []string{"g/ruby", "g/python"}, Why: "blocked: g/ruby failed"},
			}}
		release := &chain.Chain{ID: 8, Mode: chain.Full, State: chain.Finished, Roots: []string{"g/base"}, StartedAt: now, UpdatedAt: now}
		for _, x := range []*chain.Chain{c, release} {
			if err := tx.SaveChain(t.Context(), x); err != nil {
				return err
			}
		}
		return tx.SaveMRValidation(t.Context(), chain.MRValidation{ProjectID: 1, IID: 3, Project: "g/base", Title: "Slim", State: chain.MROpened,
			HeadSHA: "abcdef0123456789", PipelineID: 40, ChainID: 7, Validated: 40, Chains: []int64{5, 7}, CreatedAt: now, UpdatedAt: now,
			Cleanup: []chain.TagCleanup{{ProjectID: 1, Project: "g/base", Image: "r/g/base:mr-3"}}})
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := depsd(t, "validations")
	if code != exitOK {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"ID  MERGE REQUEST", "7   g/base!3       opened    failed", "1 of 3 dependents built, 1 failed: g/ruby"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	for _, arg := range []string{"7", "g/base!3"} {
		code, out, errOut = depsd(t, "validations", arg)
		if code != exitOK {
			t.Fatalf("validations %s: exit %d: %s", arg, code, errOut)
		}
		for _, want := range []string{
			`merge request g/base!3 "Slim": opened`,
			"validation 7: finished, depsd/dependents failed",
			"commit abcdef012345, candidate r/g/base:mr-3@sha256:c (pipeline 40), depth all",
			"validations of this merge request: 5, 7",
			"1      g/python   success  42",
			"r/g/python:depsd-validate-7@sha256:p",
			"1      g/ruby     failed   https://gl/g/ruby/-/pipelines/41",
			"2      g/app      blocked",
			"tag r/g/base:mr-3: to delete when the merge request ends",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("validations %s lacks %q:\n%s", arg, want, out)
			}
		}
	}
	code, out, _ = depsd(t, "validations", "--json", "7")
	var v chain.ValidationView
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.Chain == nil || len(v.Chain.Members) != 4 || v.Result != chain.CommitFailed {
		t.Errorf("--json 7: exit %d, %v: %s", code, err, out)
	}
	code, out, _ = depsd(t, "validations", "--json")
	var list struct{ Validations []chain.ValidationView }
	if err := json.Unmarshal([]byte(out), &list); code != exitOK || err != nil || len(list.Validations) != 1 {
		t.Errorf("--json: exit %d, %v: %s", code, err, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"validations", "8"}, exitFail, "no validation"},
		{[]string{"validations", "g/base!9"}, exitFail, "not found"},
		{[]string{"validations", "x"}, exitUsage, "ID must be a number or PROJECT!IID"},
		{[]string{"validations", "g/base!x"}, exitUsage, "want PROJECT!IID"},
		{[]string{"validations", "--limit", "0"}, exitUsage, "--limit 0"},
		{[]string{"validations", "1", "2"}, exitUsage, "depsd validations"},
	} {
		if code, _, errOut := depsd(t, tc.args...); code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %s; want %d, %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
