package store

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
)

// State copied from one backend to the other reads back the same, and a
// second copy into the now non-empty target is refused and changes nothing.
func TestCopyBetweenBackends(t *testing.T) {
	for _, dir := range [][2]backend{{backends[0], backends[1]}, {backends[1], backends[0]}} {
		t.Run(dir[0].name+"-to-"+dir[1].name, func(t *testing.T) {
			ctx := t.Context()
			from, _ := dir[0].openTemp(t)
			to, _ := dir[1].openTemp(t)
			if err := from.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0, FinishedAt: t0.Add(time.Second), Projects: 3}); err != nil {
				t.Fatal(err)
			}
			c := &chain.Chain{ID: 7, Mode: chain.Full, State: chain.Running, Roots: []string{"group/base"},
				StartedAt: t0, UpdatedAt: t0, Reasons: []chain.Reason{{Kind: chain.ReasonPipeline, Project: "group/base", PipelineID: 99, At: t0}},
				Members: []*chain.Member{{Project: "group/app", ProjectID: 20, State: chain.Pending, Upstreams: []string{"group/base"}, ActionID: "a-1", Builds: 1}}}
			err := from.UpdateChains(ctx, func(tx chain.Tx) error {
				if err := tx.SaveChain(ctx, c); err != nil {
					return err
				}
				return tx.AddAction(ctx, chain.Action{ID: "a-1", ChainID: 7, Project: "group/app", ProjectID: 20, Ref: "master",
					State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0})
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := from.RecordEvent(ctx, "k1", chain.Event{Pipeline: &chain.PipelineEvent{Project: "group/base", PipelineID: 5}}); err != nil {
				t.Fatal(err)
			}
			if _, err := from.RegisterSchedule(ctx, scheduler.ScheduleState{ID: "s1", Kind: scheduler.KindRebuild, Target: "group/base", Spec: "@daily", Cursor: t0}); err != nil {
				t.Fatal(err)
			}

			counts, err := Copy(ctx, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if len(counts) != len(copiedTables) || counts[0].Table != "projects" || counts[0].Rows != 3 {
				t.Errorf("counts = %+v", counts)
			}
			want, _ := from.Projects(ctx)
			got, err := to.Projects(ctx)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("projects after copy:\n got %+v, %v\nwant %+v", got, err, want)
			}
			var wantC, gotC *chain.Chain
			from.ViewChains(ctx, func(tx chain.Tx) error { wantC, err = tx.Chain(ctx, 7); return err })
			to.ViewChains(ctx, func(tx chain.Tx) error { gotC, err = tx.Chain(ctx, 7); return err })
			if !reflect.DeepEqual(gotC, wantC) {
				t.Errorf("chain after copy:\n got %+v\nwant %+v", gotC, wantC)
			}
			if dup, err := to.RecordEvent(ctx, "k1", chain.Event{Pipeline: &chain.PipelineEvent{Project: "x"}}); err != nil || !dup {
				t.Errorf("the copied inbox does not know key k1: dup=%v, %v", dup, err)
			}
			if dup, err := to.RecordEvent(ctx, "k2", chain.Event{Pipeline: &chain.PipelineEvent{Project: "x"}}); err != nil || dup {
				t.Errorf("a new event after the copy: dup=%v, %v", dup, err)
			}
			if st, err := to.ScheduleStates(ctx); err != nil || len(st) != 1 || !st[0].Cursor.Equal(t0) {
				t.Errorf("schedules after copy: %+v, %v", st, err)
			}
			if m, ok, err := to.LastScan(ctx); err != nil || !ok || m.Projects != 3 {
				t.Errorf("scan after copy: %+v %v %v", m, ok, err)
			}

			_, err = Copy(ctx, from, to)
			if !errors.Is(err, ErrTargetNotEmpty) {
				t.Fatalf("second copy: %v, want ErrTargetNotEmpty", err)
			}
			if got, _ := to.Projects(ctx); len(got) != 3 {
				t.Errorf("refused copy changed the target: %d projects", len(got))
			}
		})
	}
}
