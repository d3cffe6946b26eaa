package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// TestValidationsAPI: GET /api/v1/validations lists the merge requests
// validated with their newest validation and its result; GET
// /api/v1/validations/{id} shows one with its members; a release chain's
// id, or an unknown one, is not found.
func TestValidationsAPI(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	err = st.UpdateChains(ctx, func(tx chain.Tx) error {
		c := &chain.Chain{ID: 7, Mode: chain.Full, Kind: chain.KindValidation, State: chain.Finished, Roots: []string{"g/base"},
			StartedAt: now, UpdatedAt: now, EndedAt: now,
			Validation: &chain.Validation{ProjectID: 1, IID: 3, Title: "Slim", SHA: "abc", PipelineID: 40, Candidate: "r/g/base:mr-3", Digest: "sha256:c", Depth: chain.DepthDirect},
			Members: []*chain.Member{
				{Project: "g/base", State: chain.Success, PipelineID: 40},
				{Project: "g/ruby", State: chain.Failed, PipelineID: 41, Upstreams: []string{"g/base"}},
			}}
		release := &chain.Chain{ID: 8, Mode: chain.Full, State: chain.Finished, Roots: []string{"g/base"}, StartedAt: now, UpdatedAt: now}
		for _, x := range []*chain.Chain{c, release} {
			if err := tx.SaveChain(ctx, x); err != nil {
				return err
			}
		}
		return tx.SaveMRValidation(ctx, chain.MRValidation{ProjectID: 1, IID: 3, Project: "g/base", Title: "Slim", State: chain.MROpened,
			HeadSHA: "abc", PipelineID: 40, ChainID: 7, Validated: 40, Chains: []int64{7}, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{store: st, engine: engine, webhook: http.NotFoundHandler(), metrics: newMetrics(true), ready: func(context.Context) error { return nil }}
	h, _ := a.routes(false)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: not JSON: %v", path, err)
		}
		return resp.StatusCode
	}
	var list struct{ Validations []chain.ValidationView }
	if code := get("/api/v1/validations", &list); code != 200 || len(list.Validations) != 1 {
		t.Fatalf("list: %d %+v", code, list)
	}
	if v := list.Validations[0]; v.IID != 3 || v.Result != chain.CommitFailed || v.Chain == nil || v.Chain.ID != 7 || v.Summary != "0 of 1 dependent built, 1 failed: g/ruby" {
		t.Errorf("listed %+v", v)
	}
	var one chain.ValidationView
	if code := get("/api/v1/validations/7", &one); code != 200 || len(one.Chain.Members) != 2 || one.Chain.Kind != chain.KindValidation {
		t.Errorf("one: %d %+v", code, one)
	}
	var e map[string]any
	for path, want := range map[string]int{"/api/v1/validations/8": 404, "/api/v1/validations/99": 404, "/api/v1/validations/x": 400, "/api/v1/validations?limit=0": 400} {
		if code := get(path, &e); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	// The rebuilds' list shows no validation.
	var chains struct{ Chains []chain.ChainView }
	if code := get("/api/v1/chains", &chains); code != 200 || len(chains.Chains) != 1 || chains.Chains[0].ID != 8 {
		t.Errorf("chains: %d %+v", code, chains)
	}
}
