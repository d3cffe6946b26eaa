package verify_test

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/verify"
)

// Digests and layers of an upstream ("ruby") that moved twice: old → mid
// → cur, each a rebuild with other layers, and cur as an index whose
// amd64 manifest is curAMD.
const (
	old, mid, cur, curAMD = "sha256:0001", "sha256:0002", "sha256:0003", "sha256:0003a"
	other                 = "sha256:0999"
)

var (
	oldLayers = []string{"sha256:d1", "sha256:d2"}
	midLayers = []string{"sha256:d1", "sha256:d2", "sha256:d3"} // old plus one layer
	curLayers = []string{"sha256:d1", "sha256:e2"}
	current   = verify.Read{Digest: cur, Manifest: curAMD, DiffIDs: curLayers}
)

func plus(base []string, own ...string) []string {
	return append(append([]string(nil), base...), own...)
}

func TestDecide(t *testing.T) {
	earlierRead := []verify.Read{{Digest: mid, Manifest: mid, DiffIDs: midLayers}, {Digest: old, Manifest: old, DiffIDs: oldLayers}}
	earlierDigests := []verify.Read{{Digest: mid}, {Digest: old}}
	for _, tc := range []struct {
		name    string
		image   verify.Read
		earlier []verify.Read
		state   verify.State
		reason  verify.Reason
		by      string
		builtOn string
		detail  string // a part of the sentence an operator reads
	}{
		{name: "annotation names the current index",
			image: verify.Read{Annotated: true, BaseDigest: cur, DiffIDs: []string{"sha256:squashed"}},
			state: verify.StateFresh, by: verify.ByAnnotation, builtOn: cur, detail: "its current image"},
		{name: "annotation names the current platform manifest",
			image: verify.Read{Annotated: true, BaseDigest: curAMD},
			state: verify.StateFresh, by: verify.ByAnnotation, builtOn: cur},
		{name: "no annotation, current layers first",
			image: verify.Read{DiffIDs: plus(curLayers, "sha256:own")},
			state: verify.StateFresh, by: verify.ByLayers, builtOn: cur, detail: "2 layers"},
		{name: "FROM-only image: the same layers",
			image: verify.Read{DiffIDs: curLayers},
			state: verify.StateFresh, by: verify.ByLayers},
		{name: "annotation naming the grandparent (kaniko), current layers first",
			image: verify.Read{Annotated: true, BaseDigest: other, DiffIDs: plus(curLayers, "sha256:own")},
			state: verify.StateFresh, by: verify.ByLayers},
		{name: "annotation names an earlier digest",
			image:   verify.Read{Annotated: true, BaseDigest: old, DiffIDs: plus(oldLayers, "sha256:own")},
			earlier: earlierDigests,
			state:   verify.StateStale, by: verify.ByAnnotation, builtOn: old, detail: "built on ruby sha256:0001, not sha256:0003"},
		{name: "annotation names an earlier platform manifest",
			image:   verify.Read{Annotated: true, BaseDigest: "sha256:0001a"},
			earlier: []verify.Read{{Digest: old, Manifest: "sha256:0001a"}},
			state:   verify.StateStale, by: verify.ByAnnotation, builtOn: old},
		{name: "no annotation, an earlier image's layers first",
			image:   verify.Read{DiffIDs: plus(oldLayers, "sha256:own")},
			earlier: earlierRead,
			state:   verify.StateStale, by: verify.ByLayers, builtOn: old},
		{name: "the longest earlier prefix is the base",
			image:   verify.Read{DiffIDs: plus(midLayers, "sha256:own")},
			earlier: earlierRead,
			state:   verify.StateStale, by: verify.ByLayers, builtOn: mid},
		{name: "earlier layers unknown: no judgement by layers",
			image:   verify.Read{DiffIDs: plus(oldLayers, "sha256:own")},
			earlier: earlierDigests,
			state:   verify.StateUnknown, reason: verify.ReasonNoBase},
		{name: "squashed, no annotation",
			image:   verify.Read{DiffIDs: []string{"sha256:squashed"}},
			earlier: earlierRead,
			state:   verify.StateUnknown, reason: verify.ReasonNoBase, detail: "squashed"},
		{name: "FROM scratch: empty annotation",
			image:   verify.Read{Annotated: true, BaseDigest: "", DiffIDs: []string{"sha256:own"}},
			earlier: earlierRead,
			state:   verify.StateUnknown, reason: verify.ReasonScratch, detail: "FROM scratch"},
		{name: "annotation names a digest never recorded",
			image:   verify.Read{Annotated: true, BaseDigest: other, DiffIDs: []string{"sha256:own"}},
			earlier: earlierRead,
			state:   verify.StateUnknown, reason: verify.ReasonUnrecordedBase, detail: "sha256:0999"},
		{name: "an empty upstream is nobody's prefix",
			image: verify.Read{DiffIDs: []string{"sha256:own"}},
			state: verify.StateUnknown, reason: verify.ReasonNoBase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := current
			if tc.name == "an empty upstream is nobody's prefix" {
				cur.DiffIDs = nil
			}
			v := verify.Decide("ruby", tc.image, cur, tc.earlier)
			if v.State != tc.state || v.Reason != tc.reason || v.By != tc.by {
				t.Errorf("Decide = %s/%s by %q (%s); want %s/%s by %q", v.State, v.Reason, v.By, v.Detail, tc.state, tc.reason, tc.by)
			}
			if tc.builtOn != "" && v.BuiltOn != tc.builtOn {
				t.Errorf("built on %s, want %s", v.BuiltOn, tc.builtOn)
			}
			if v.Upstream != "ruby" || v.Current != cur.Digest {
				t.Errorf("verdict names %s at %s, want ruby at %s", v.Upstream, v.Current, cur.Digest)
			}
			if !strings.Contains(v.Detail, tc.detail) {
				t.Errorf("detail %q, want it to say %q", v.Detail, tc.detail)
			}
		})
	}
}

func TestSum(t *testing.T) {
	fresh := verify.Verdict{State: verify.StateFresh, Detail: "f"}
	stale := verify.Verdict{State: verify.StateStale, Detail: "s"}
	unknown := verify.Verdict{State: verify.StateUnknown, Detail: "u"}
	for _, tc := range []struct {
		name   string
		in     []verify.Verdict
		state  verify.State
		detail string
	}{
		{"all fresh", []verify.Verdict{fresh, fresh}, verify.StateFresh, "every upstream"},
		{"stale wins over unknown", []verify.Verdict{unknown, stale, fresh}, verify.StateStale, "s"},
		{"unknown beats fresh", []verify.Verdict{fresh, unknown}, verify.StateUnknown, "u"},
		{"no upstream", nil, verify.StateUnknown, "no upstream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, d := verify.Sum(tc.in)
			if st != tc.state || !strings.Contains(d, tc.detail) {
				t.Errorf("Sum = %s %q, want %s %q", st, d, tc.state, tc.detail)
			}
		})
	}
}
