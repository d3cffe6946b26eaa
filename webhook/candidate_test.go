package webhook

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// withJSON changes a fixture's JSON: set gets the decoded document.
func withJSON(t *testing.T, body []byte, set func(map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	set(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A merge request pipeline is a candidate, never a release: accepted with
// its merge request where premerge covers the project, ignored elsewhere,
// even when its ref names the default branch. A branch no node follows
// is accepted there only for its success (it may be a merge request's
// source).
func TestDecodeCandidates(t *testing.T) {
	mr := fixture(t, "pipeline_merge_request.json")
	other := fixture(t, "pipeline_other_branch.json")
	covers := Covers(func(p string) bool { return p == "containers/base" })
	onMain := withJSON(t, mr, func(d map[string]any) { d["object_attributes"].(map[string]any)["ref"] = "main" })
	noMR := withJSON(t, mr, func(d map[string]any) { d["merge_request"] = nil })
	failed := withJSON(t, other, func(d map[string]any) { d["object_attributes"].(map[string]any)["status"] = "failed" })
	for _, tc := range []struct {
		name      string
		body      []byte
		premerge  Covers
		accepted  bool
		candidate bool // the event names its merge request
	}{
		{"merge request pipeline, no premerge", mr, nil, false, false},
		{"merge request pipeline, premerge", mr, covers, true, true},
		{"merge request pipeline on the default branch's name, no premerge", onMain, nil, false, false},
		{"merge request pipeline on the default branch's name, premerge", onMain, covers, true, true},
		{"merge request pipeline without its merge request", noMR, covers, false, false},
		{"another branch's success, no premerge", other, nil, false, false},
		{"another branch's success, premerge", other, covers, true, false},
		{"another branch's failure, premerge", failed, covers, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode("Pipeline Hook", tc.body, nil, nil, tc.premerge, time.Now())
			var ign *Ignored
			if !tc.accepted {
				if !errors.As(err, &ign) {
					t.Fatalf("got %+v, %v; want it ignored", ev.Pipeline, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := ev.Pipeline
			if got := p.MergeRequest != nil; got != tc.candidate {
				t.Fatalf("merge request %+v, want one: %v", p.MergeRequest, tc.candidate)
			}
			if tc.candidate {
				if m := p.MergeRequest; m.IID != 1 || m.SourceBranch != "depsd/pins" || m.TargetBranch != "main" || m.URL == "" || m.Title == "" ||
					p.Source != chain.SourceMergeRequest {
					t.Errorf("merge request %+v, source %s", m, p.Source)
				}
			}
		})
	}
}
