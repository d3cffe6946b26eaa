package scan

import (
	"slices"
	"testing"
)

// TestSpreadDealsRuleProjectsEvenly: the projects whose branches a batch
// reads are dealt over the batches (however they sit in the listing), no
// batch is over size, every project is in exactly one batch, and without
// such projects the batches are the listing's runs, in order.
func TestSpreadDealsRuleProjectsEvenly(t *testing.T) {
	for _, tt := range []struct {
		n, size     int
		refs        func(i int) bool
		maxPerBatch int
	}{
		{1000, 50, func(i int) bool { return i >= 400 && i < 500 }, 5}, // 100 together
		{1000, 50, func(i int) bool { return i%2 == 0 }, 25},
		{120, 50, func(i int) bool { return i < 7 }, 3},
		{120, 50, func(int) bool { return true }, 50},
		{120, 50, func(int) bool { return false }, 0},
	} {
		pending := make([]int, tt.n)
		for i := range pending {
			pending[i] = i
		}
		batches := spread(pending, tt.refs, tt.size)
		if want := (tt.n + tt.size - 1) / tt.size; len(batches) != want {
			t.Fatalf("%d batches, want %d", len(batches), want)
		}
		var all []int
		for _, b := range batches {
			refs := 0
			for _, i := range b {
				if tt.refs(i) {
					refs++
				}
			}
			if len(b) > tt.size || refs > tt.maxPerBatch {
				t.Errorf("a batch of %d with %d rule projects; want at most %d and %d", len(b), refs, tt.size, tt.maxPerBatch)
			}
			all = append(all, b...)
		}
		sorted := slices.Sorted(slices.Values(all))
		if !slices.Equal(sorted, pending) {
			t.Errorf("batches hold %d projects, not each of the %d once", len(all), tt.n)
		}
		if tt.maxPerBatch == 0 && !slices.Equal(all, pending) {
			t.Error("without rule projects the batches are not the listing's runs")
		}
	}
}
