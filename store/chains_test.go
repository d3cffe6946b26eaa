package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

func TestChainRoundTrip(t *testing.T) { forEachBackend(t, testChainRoundTrip) }

func testChainRoundTrip(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	c := &chain.Chain{
		ID: 1, Mode: chain.Full, State: chain.Running, Roots: []string{"g/base"},
		Reasons:   []chain.Reason{{Kind: chain.ReasonPipeline, Project: "g/base", Detail: "pipeline 9 succeeded", PipelineID: 9, At: t0}},
		Skipped:   []chain.Skip{{Project: "g/x", Why: "on dependency cycle g/x → g/y → g/x (never followed)"}},
		StartedAt: t0, UpdatedAt: t0.Add(time.Second),
		Members: []*chain.Member{
			{Project: "g/app", ProjectID: 2, State: chain.Triggered, Upstreams: []string{"g/base"}, Requeued: true, Builds: 1,
				ActionID: "a-1", PipelineID: 12, PipelineURL: "https://x/12", TriggeredAt: t0.Add(time.Minute)},
			{Project: "g/base", ProjectID: 1, State: chain.Success, PipelineID: 9, FinishedAt: t0},
			{Project: "g/shop", ProjectID: 3, State: chain.Stale, Upstreams: []string{"g/base"}, Builds: 2, NoCache: true,
				Verified: chain.ImageStale, VerifyDetail: "built on g/base sha256:0123456789ab, not sha256:ba9876543210 (base annotation)",
				PipelineID: 14, FinishedAt: t0.Add(2 * time.Minute)},
		},
	}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error { return tx.SaveChain(ctx, c) })
	if err != nil {
		t.Fatal(err)
	}
	var got *chain.Chain
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		var err error
		got, err = tx.Chain(ctx, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, c)
	}
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		if _, err := tx.Chain(ctx, 2); !errors.Is(err, chain.ErrNotFound) {
			t.Errorf("Chain(2) = %v, want ErrNotFound", err)
		}
		for _, tc := range []struct {
			f    chain.Filter
			want int
		}{
			{chain.Filter{}, 1},
			{chain.Filter{State: chain.Finished}, 0},
			{chain.Filter{Project: "g/app"}, 1},
			{chain.Filter{Project: "g/other"}, 0},
		} {
			cs, err := tx.Chains(ctx, tc.f)
			if err != nil || len(cs) != tc.want {
				t.Errorf("Chains(%+v) = %d, %v; want %d", tc.f, len(cs), err, tc.want)
			}
		}
		seen, err := tx.PipelineSeen(ctx, 9)
		if err != nil || !seen.Started {
			t.Errorf("PipelineSeen(9) = %+v, %v; want started", seen, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEventsDedupeAndPrune(t *testing.T) { forEachBackend(t, testEventsDedupeAndPrune) }

func testEventsDedupeAndPrune(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	ev := chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: 5, Status: "success",
		Variables: map[string]string{chain.VarActionID: "a-x"}}}
	for i, key := range []string{"k1", "k1", "k2", "", ""} {
		dup, err := s.RecordEvent(ctx, key, ev)
		if err != nil || dup != (i == 1) {
			t.Errorf("RecordEvent #%d (%q) = %v, %v", i, key, dup, err)
		}
	}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		n, err := tx.CountEvents(ctx)
		if err != nil || n != 4 {
			t.Errorf("CountEvents = %d, %v; want 4", n, err)
		}
		se, ok, err := tx.NextEvent(ctx)
		if err != nil || !ok || se.Key != "k1" || !reflect.DeepEqual(se.Event, ev) {
			t.Fatalf("NextEvent = %+v, %v, %v", se, ok, err)
		}
		if err := tx.MarkEvent(ctx, se.Seq, time.Now(), "advanced"); err != nil {
			return err
		}
		if next, _, _ := tx.NextEvent(ctx); next.Key != "k2" {
			t.Errorf("next after marking = %q, want k2", next.Key)
		}
		if n, err := tx.PruneEvents(ctx, time.Now().Add(-time.Hour)); n != 0 || err != nil {
			t.Errorf("pruned %d recent events", n)
		}
		n, err = tx.PruneEvents(ctx, time.Now().Add(time.Hour))
		if n != 1 || err != nil {
			t.Errorf("PruneEvents = %d, %v; want the 1 processed", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Once pruned, the key may be recorded again.
	if dup, err := s.RecordEvent(ctx, "k1", ev); dup || err != nil {
		t.Errorf("RecordEvent after prune = %v, %v", dup, err)
	}
}

func TestNextEventUntilMarked(t *testing.T) { forEachBackend(t, testNextEventUntilMarked) }

// testNextEventUntilMarked: in a write transaction NextEvent reads ahead,
// yet answers the oldest event not marked, whichever was marked, also past
// what it read at once.
func testNextEventUntilMarked(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	n := eventPrefetch + 3
	for i := range n {
		ev := chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: int64(i + 1), Status: "running"}}
		if _, err := s.RecordEvent(ctx, fmt.Sprintf("k%d", i), ev); err != nil {
			t.Fatal(err)
		}
	}
	next := func(tx chain.Tx) chain.StoredEvent {
		t.Helper()
		se, ok, err := tx.NextEvent(ctx)
		if err != nil || !ok {
			t.Fatalf("NextEvent = %v, %v", ok, err)
		}
		return se
	}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		first := next(tx)
		if again := next(tx); again.Seq != first.Seq || first.Event.Pipeline.PipelineID != 1 {
			t.Errorf("NextEvent twice = pipelines %d and %d, want 1 twice", first.Event.Pipeline.PipelineID, again.Event.Pipeline.PipelineID)
		}
		// The second marked first (another processor's order): the
		// first is still the oldest unprocessed.
		second := first.Seq + 1
		if err := tx.MarkEvent(ctx, second, time.Now(), "done"); err != nil {
			return err
		}
		if se := next(tx); se.Seq != first.Seq {
			t.Errorf("after marking seq %d, NextEvent = seq %d, want %d", second, se.Seq, first.Seq)
		}
		var got []int64
		for {
			se, ok, err := tx.NextEvent(ctx)
			if err != nil || !ok {
				if len(got) != n-1 || got[0] != 1 || got[1] != 3 || got[len(got)-1] != int64(n) {
					t.Errorf("applied pipelines %v, want 1, 3…%d", got, n)
				}
				return err
			}
			got = append(got, se.Event.Pipeline.PipelineID)
			if err := tx.MarkEvent(ctx, se.Seq, time.Now(), "done"); err != nil {
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRecordEventsBatch(t *testing.T) { forEachBackend(t, testRecordEventsBatch) }

// testRecordEventsBatch: one batch dedupes against earlier batches and
// within itself, keeps its order, and more rows than one statement takes
// still go in, whether recorded in a transaction of its own or inside a
// write transaction (chain.Tx.RecordEvents), where a rollback records
// nothing.
func testRecordEventsBatch(t *testing.T, b backend) {
	inTx := func(s *Store) func(context.Context, []chain.NewEvent) ([]bool, error) {
		return func(ctx context.Context, evs []chain.NewEvent) (dups []bool, err error) {
			err = s.UpdateChains(ctx, func(tx chain.Tx) error {
				dups, err = tx.RecordEvents(ctx, evs)
				return err
			})
			return dups, err
		}
	}
	for _, way := range []struct {
		name   string
		record func(*Store) func(context.Context, []chain.NewEvent) ([]bool, error)
	}{{"own transaction", func(s *Store) func(context.Context, []chain.NewEvent) ([]bool, error) { return s.RecordEvents }}, {"in a write transaction", inTx}} {
		t.Run(way.name, func(t *testing.T) { testRecordEventsBatchWith(t, b, way.record) })
	}
	t.Run("rolled back", func(t *testing.T) {
		s, _ := b.openTemp(t)
		ctx := t.Context()
		failed := errors.New("failed later")
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			ev := chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: 1, Status: "running"}}
			if _, err := tx.RecordEvents(ctx, []chain.NewEvent{{Key: "k", Event: ev}}); err != nil {
				return err
			}
			return failed
		})
		if !errors.Is(err, failed) {
			t.Fatalf("UpdateChains = %v", err)
		}
		err = s.ViewChains(ctx, func(tx chain.Tx) error {
			n, err := tx.CountEvents(ctx)
			if n != 0 {
				t.Errorf("%d events recorded by a rolled-back transaction", n)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func testRecordEventsBatchWith(t *testing.T, b backend, recordWith func(*Store) func(context.Context, []chain.NewEvent) ([]bool, error)) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	record := recordWith(s)
	ev := func(id int64) chain.Event {
		return chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: id, Status: "running"}}
	}
	if _, err := s.RecordEvent(ctx, "old", ev(1)); err != nil {
		t.Fatal(err)
	}
	batch := []chain.NewEvent{{Key: "a", Event: ev(2)}, {Key: "old", Event: ev(3)}, {Key: "b", Event: ev(4)}, {Key: "a", Event: ev(5)}, {Key: "", Event: ev(6)}, {Key: "", Event: ev(7)}}
	for i := range 1200 {
		batch = append(batch, chain.NewEvent{Key: fmt.Sprintf("many-%d", i), Event: ev(int64(100 + i))})
	}
	dups, err := record(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]bool, len(batch))
	want[1], want[3] = true, true
	if !reflect.DeepEqual(dups, want) {
		t.Errorf("duplicates = %v…, want %v…", dups[:7], want[:7])
	}
	var order []int64
	err = s.UpdateChains(ctx, func(tx chain.Tx) error {
		order, err = applyAll(ctx, tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 1+4+1200 || !reflect.DeepEqual(order[:5], []int64{1, 2, 4, 6, 7}) || order[len(order)-1] != 1299 {
		t.Errorf("recorded %d events in order %v…%v", len(order), order[:min(5, len(order))], order[len(order)-1])
	}
	// The batch's keys are duplicates for the next batch.
	dups, err = record(ctx, []chain.NewEvent{{Key: "b", Event: ev(8)}, {Key: "many-1199", Event: ev(9)}, {Key: "c", Event: ev(10)}})
	if err != nil || !reflect.DeepEqual(dups, []bool{true, true, false}) {
		t.Errorf("second batch = %v, %v", dups, err)
	}
}

func TestOutboxDueAndLease(t *testing.T) { forEachBackend(t, testOutboxDueAndLease) }

func testOutboxDueAndLease(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	a := chain.Action{ID: "a-1", ChainID: 1, Project: "g/a", ProjectID: 3, Ref: "main", Upstreams: []string{"g/b", "g/c"},
		NoCache: true, State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		if err := tx.AddAction(ctx, a); err != nil {
			return err
		}
		if _, ok, _ := tx.DueAction(ctx, t0.Add(-time.Second)); ok {
			t.Error("action due before its time")
		}
		got, ok, err := tx.DueAction(ctx, t0)
		if err != nil || !ok || !reflect.DeepEqual(got, a) {
			t.Fatalf("DueAction = %+v, %v, %v", got, ok, err)
		}
		got.LeaseUntil, got.Attempts = t0.Add(time.Minute), 1
		if err := tx.UpdateAction(ctx, got); err != nil {
			return err
		}
		if _, ok, _ := tx.DueAction(ctx, t0.Add(30*time.Second)); ok {
			t.Error("leased action is due")
		}
		if next, ok, _ := tx.NextDue(ctx); !ok || !next.Equal(t0.Add(time.Minute)) {
			t.Errorf("NextDue = %v, %v; want the lease end", next, ok)
		}
		if _, ok, _ := tx.DueAction(ctx, t0.Add(time.Minute)); !ok {
			t.Error("action not due once its lease ran out")
		}
		got.State, got.PipelineID = chain.ActionSent, 77
		if err := tx.UpdateAction(ctx, got); err != nil {
			return err
		}
		if seen, err := tx.PipelineSeen(ctx, 77); err != nil || !seen.HasAction || !reflect.DeepEqual(seen.Action, got) {
			t.Errorf("PipelineSeen(77) = %+v, %v; want action %+v", seen, err, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPipelineSeen(t *testing.T) { forEachBackend(t, testPipelineSeen) }

// testPipelineSeen: the one look-up of a pipeline event finds the first
// action that created the pipeline (none for id 0: actions not sent yet
// store none), and tells whether a member counted the pipeline's success
// and whether a chain was started by it.
func testPipelineSeen(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	action := func(id string, pipeline int64, created time.Time) chain.Action {
		return chain.Action{ID: id, ChainID: 1, Project: "g/app", ProjectID: 7, Ref: "main", Upstreams: []string{"g/base"},
			State: chain.ActionSent, Attempts: 1, NextAttemptAt: t0, PipelineID: pipeline, CreatedAt: created, SentAt: created}
	}
	first, second, unsent := action("a-1", 77, t0), action("a-2", 77, t0.Add(time.Second)), action("a-3", 0, t0)
	unsent.State, unsent.Attempts, unsent.SentAt = chain.ActionPending, 0, time.Time{}
	c := &chain.Chain{ID: 1, Mode: chain.Full, State: chain.Running, Roots: []string{"g/base"}, StartedAt: t0, UpdatedAt: t0,
		Reasons: []chain.Reason{{Kind: chain.ReasonPipeline, Project: "g/base", PipelineID: 99, At: t0}},
		Members: []*chain.Member{
			{Project: "g/base", ProjectID: 5, State: chain.Success, PipelineID: 88},
			{Project: "g/app", ProjectID: 7, State: chain.MemberRunning, PipelineID: 89},
			{Project: "g/stale", ProjectID: 8, State: chain.Stale, PipelineID: 86},
			{Project: "g/verifying", ProjectID: 9, State: chain.Verifying, PipelineID: 87},
		}}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		for _, a := range []chain.Action{second, first, unsent} {
			if err := tx.AddAction(ctx, a); err != nil {
				return err
			}
		}
		return tx.SaveChain(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pipeline int64
		want     chain.PipelineSeen
	}{
		{77, chain.PipelineSeen{Action: first, HasAction: true}},
		{0, chain.PipelineSeen{}},
		{88, chain.PipelineSeen{Counted: true}},
		{86, chain.PipelineSeen{Counted: true}}, // stale: the success counted, and was judged
		{87, chain.PipelineSeen{Counted: true}}, // verifying: it counted, its images are read
		{89, chain.PipelineSeen{}},
		{99, chain.PipelineSeen{Started: true}},
		{100, chain.PipelineSeen{}},
	} {
		// In the writing transaction and in a reading one alike.
		for _, view := range []func(context.Context, func(chain.Tx) error) error{s.UpdateChains, s.ViewChains} {
			err := view(ctx, func(tx chain.Tx) error {
				got, err := tx.PipelineSeen(ctx, tc.pipeline)
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("PipelineSeen(%d) = %+v\nwant %+v", tc.pipeline, got, tc.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// And as the recorder's quiet path asks, after recording an event
		// of the pipeline announced with RecordingFirst: on PostgreSQL the
		// look-up came with the BEGIN, in the same batch.
		evs := []chain.NewEvent{{Key: fmt.Sprintf("seen-%d", tc.pipeline),
			Event: chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/app", PipelineID: tc.pipeline, Status: "running"}}}}
		err := s.UpdateChains(chain.RecordingFirst(ctx, evs), func(tx chain.Tx) error {
			if _, err := tx.RecordEvents(ctx, evs); err != nil {
				return err
			}
			got, err := tx.PipelineSeen(ctx, tc.pipeline)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PipelineSeen(%d) after its event's recording = %+v\nwant %+v", tc.pipeline, got, tc.want)
			}
			_, err = applyAll(ctx, tx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecordingFirstLooksUpAfterOlderEvents(t *testing.T) {
	forEachBackend(t, testRecordingFirstLooksUpAfterOlderEvents)
}

// testRecordingFirstLooksUpAfterOlderEvents: the look-up of a pipeline
// that came with its event's recording (RecordingFirst) is not used when
// an older event was applied before it, which may have changed the
// answer: here, the older event's application adds the pipeline's action.
func testRecordingFirstLooksUpAfterOlderEvents(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	ev := func(id int64) chain.Event {
		return chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/app", PipelineID: id, Status: "running"}}
	}
	if _, err := s.RecordEvent(ctx, "older", ev(1)); err != nil {
		t.Fatal(err)
	}
	evs := []chain.NewEvent{{Key: "newer", Event: ev(2)}}
	added := chain.Action{ID: "a-2", ChainID: 1, Project: "g/app", ProjectID: 7, Ref: "main", State: chain.ActionSent,
		Attempts: 1, NextAttemptAt: t0, PipelineID: 2, CreatedAt: t0, SentAt: t0}
	err := applyRecordedFirst(ctx, s, evs, func(tx chain.Tx, se chain.StoredEvent) error {
		seen, err := tx.PipelineSeen(ctx, se.Event.Pipeline.PipelineID)
		if err != nil {
			return err
		}
		switch se.Key {
		case "older":
			return tx.AddAction(ctx, added)
		case "newer":
			if !seen.HasAction || seen.Action.ID != added.ID {
				t.Errorf("PipelineSeen(2) after the older event added its action = %+v, want action %s", seen, added.ID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// applyRecordedFirst records evs in a write transaction that announced
// them (RecordingFirst), then applies every unprocessed event in order:
// each, then marks it processed.
func applyRecordedFirst(ctx context.Context, s *Store, evs []chain.NewEvent, each func(tx chain.Tx, se chain.StoredEvent) error) error {
	return s.UpdateChains(chain.RecordingFirst(ctx, evs), func(tx chain.Tx) error {
		if _, err := tx.RecordEvents(ctx, evs); err != nil {
			return err
		}
		for {
			se, ok, err := tx.NextEvent(ctx)
			if err != nil || !ok {
				return err
			}
			if err := each(tx, se); err != nil {
				return err
			}
			if err := tx.MarkEvent(ctx, se.Seq, t0, "done"); err != nil {
				return err
			}
		}
	})
}

func TestActionLookedUpWithItsEventsRecording(t *testing.T) {
	forEachBackend(t, testActionLookedUpWithItsEventsRecording)
}

// testActionLookedUpWithItsEventsRecording: an event naming its action
// (DEPSD_ACTION_ID) and recorded with RecordingFirst finds the action as
// a plain look-up does (on PostgreSQL it came with the BEGIN), or none;
// and after an older event changed the action, the changed one.
func testActionLookedUpWithItsEventsRecording(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	stored := chain.Action{ID: "a-1", ChainID: 1, Project: "g/app", ProjectID: 7, Ref: "main", Upstreams: []string{"g/base", "g/lib"},
		State: chain.ActionSent, Attempts: 2, NextAttemptAt: t0, LeaseUntil: t0.Add(time.Minute), ClaimedBy: "replica-1",
		LastError: "502", PipelineID: 77, PipelineURL: "https://gitlab.example.com/g/app/-/pipelines/77", CreatedAt: t0, SentAt: t0.Add(time.Second)}
	if err := s.UpdateChains(ctx, func(tx chain.Tx) error { return tx.AddAction(ctx, stored) }); err != nil {
		t.Fatal(err)
	}
	var want chain.Action
	if err := s.ViewChains(ctx, func(tx chain.Tx) error {
		var err error
		want, _, err = tx.Action(ctx, "a-1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ev := func(id int64, action string) chain.Event {
		return chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/app", PipelineID: id, Status: "success",
			Variables: map[string]string{chain.VarActionID: action}}}
	}
	// lookUp records evs announced, applies the events in order (first
	// calls it for each) and returns what Action found for the last.
	lookUp := func(evs []chain.NewEvent, first func(tx chain.Tx, se chain.StoredEvent) error) (got chain.Action, has bool) {
		t.Helper()
		err := applyRecordedFirst(ctx, s, evs, func(tx chain.Tx, se chain.StoredEvent) error {
			var err error
			if got, has, err = tx.Action(ctx, se.Event.Pipeline.Variables[chain.VarActionID]); err != nil {
				return err
			}
			return first(tx, se)
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, has
	}
	nothing := func(chain.Tx, chain.StoredEvent) error { return nil }
	if got, has := lookUp([]chain.NewEvent{{Key: "k-1", Event: ev(77, "a-1")}}, nothing); !has || !reflect.DeepEqual(got, want) {
		t.Errorf("Action(a-1) with its event's recording = %+v, %v\nwant %+v", got, has, want)
	}
	if got, has := lookUp([]chain.NewEvent{{Key: "k-2", Event: ev(78, "a-none")}}, nothing); has {
		t.Errorf("Action(a-none) = %+v, want none", got)
	}
	// An older event (of another action), applied first, marks a-1
	// failed.
	if _, err := s.RecordEvent(ctx, "k-older", ev(79, "a-other")); err != nil {
		t.Fatal(err)
	}
	fail := func(tx chain.Tx, se chain.StoredEvent) error {
		if se.Key != "k-older" {
			return nil
		}
		changed := want
		changed.State = chain.ActionFailed
		return tx.UpdateAction(ctx, changed)
	}
	if got, _ := lookUp([]chain.NewEvent{{Key: "k-3", Event: ev(77, "a-1")}}, fail); got.State != chain.ActionFailed {
		t.Errorf("Action(a-1) after an older event failed it: state %s, want %s", got.State, chain.ActionFailed)
	}
}

func TestNewChainIDs(t *testing.T) { forEachBackend(t, testNewChainIDs) }

// testNewChainIDs: ids handed out in one transaction differ, whether or
// not the active chains were read first (they bring the next id along),
// and are above every stored chain's.
func testNewChainIDs(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	for _, readActive := range []bool{false, true} {
		var ids []int64
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			if readActive {
				if _, err := tx.ActiveChains(ctx); err != nil {
					return err
				}
			}
			for range 2 {
				id, err := tx.NewChainID(ctx)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			c := &chain.Chain{ID: ids[1], Mode: chain.Full, State: chain.Running, Roots: []string{"g/base"}, StartedAt: t0, UpdatedAt: t0}
			return tx.SaveChain(ctx, c)
		})
		if err != nil {
			t.Fatal(err)
		}
		// The second round is above the chain the first stored.
		if want := map[bool][]int64{false: {1, 2}, true: {3, 4}}[readActive]; !slices.Equal(ids, want) {
			t.Errorf("ids %v (active chains read first: %v), want %v", ids, readActive, want)
		}
	}
}

func TestRecordEventsThenApplyInOneTransaction(t *testing.T) {
	forEachBackend(t, testRecordEventsThenApplyInOneTransaction)
}

// testRecordEventsThenApplyInOneTransaction: events recorded inside a
// write transaction come out of its NextEvent after the unprocessed ones
// recorded before, in order, however many those are (on PostgreSQL the
// insert also reads the older ones ahead), and a duplicate comes out once.
func testRecordEventsThenApplyInOneTransaction(t *testing.T, b backend) {
	for _, announced := range []bool{false, true} {
		for _, older := range []int{0, 2, eventPrefetch, eventPrefetch + 3} {
			t.Run(fmt.Sprintf("%d older, announced %v", older, announced), func(t *testing.T) {
				s, _ := b.openTemp(t)
				ctx := t.Context()
				ev := func(id int64) chain.Event {
					return chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: id, Status: "running"}}
				}
				var want []int64
				for i := range older {
					if _, err := s.RecordEvent(ctx, fmt.Sprintf("old-%d", i), ev(int64(i))); err != nil {
						t.Fatal(err)
					}
					want = append(want, int64(i))
				}
				batch := []chain.NewEvent{{Key: "new-b", Event: ev(100)}, {Key: "new-a", Event: ev(101)}, {Key: "old-0", Event: ev(102)}}
				want = append(want, 100, 101)
				wantDups := []bool{false, false, older > 0}
				if older == 0 {
					want = append(want, 102)
				}
				var got []int64
				// Announced (RecordingFirst), as the recorder's quiet path
				// does, or not: on PostgreSQL the insert then goes with the
				// BEGIN, or on its own.
				err := s.UpdateChains(announcedIf(ctx, announced, batch), func(tx chain.Tx) error {
					dups, err := tx.RecordEvents(ctx, batch)
					if err != nil {
						return err
					}
					if !reflect.DeepEqual(dups, wantDups) {
						t.Errorf("duplicates = %v, want %v", dups, wantDups)
					}
					got, err = applyAll(ctx, tx)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("applied %v, want %v", got, want)
				}
			})
		}
	}
}

// applyAll marks every unprocessed event processed, in NextEvent's order,
// and returns their pipeline ids.
func applyAll(ctx context.Context, tx chain.Tx) ([]int64, error) {
	var ids []int64
	for {
		se, ok, err := tx.NextEvent(ctx)
		if err != nil || !ok {
			return ids, err
		}
		ids = append(ids, se.Event.Pipeline.PipelineID)
		if err := tx.MarkEvent(ctx, se.Seq, time.Now(), "done"); err != nil {
			return ids, err
		}
	}
}
