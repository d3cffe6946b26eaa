package store

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
)

// cachedChainStore returns a store whose cache holds the running chain 1
// (g/app waiting for g/base, which builds), and the database's path.
func cachedChainStore(t *testing.T, b backend) (*Store, string) {
	t.Helper()
	s, dsn := b.openTemp(t)
	ctx := t.Context()
	c := &chain.Chain{ID: 1, Mode: chain.Full, State: chain.Running, Roots: []string{"g/base"}, StartedAt: t0, UpdatedAt: t0,
		Members: []*chain.Member{
			{Project: "g/app", ProjectID: 2, State: chain.Waiting, Upstreams: []string{"g/base"}},
			{Project: "g/base", ProjectID: 1, State: chain.Pending, ActionID: "a-1"},
		}}
	if err := s.UpdateChains(ctx, func(tx chain.Tx) error { return tx.SaveChain(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	// A transaction that lists the active chains leaves them cached.
	if err := s.UpdateChains(ctx, func(tx chain.Tx) error { _, err := tx.ActiveChains(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	return s, dsn
}

// storedChain reads chain 1 through a store of its own (no cache of this
// process's).
func storedChain(t *testing.T, dsn string) *chain.Chain {
	t.Helper()
	other, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var c *chain.Chain
	err = other.ViewChains(t.Context(), func(tx chain.Tx) error {
		c, err = tx.Chain(t.Context(), 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// storedMembers reads chain 1's members as stored.
func storedMembers(t *testing.T, dsn string) map[string]chain.Member {
	t.Helper()
	out := map[string]chain.Member{}
	for _, m := range storedChain(t, dsn).Members {
		out[m.Project] = *m
	}
	return out
}

func TestSecondSaveInOneTransactionIsWritten(t *testing.T) {
	forEachBackend(t, testSecondSaveInOneTransactionIsWritten)
}

// testSecondSaveInOneTransactionIsWritten: a chain saved twice in one
// transaction, changed in between, is stored as it was at the second save
// (the store once took the first save's chain as its reference, and found
// nothing changed the second time).
func testSecondSaveInOneTransactionIsWritten(t *testing.T, b backend) {
	s, dsn := cachedChainStore(t, b)
	ctx := t.Context()
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		cs, err := tx.ActiveChains(ctx)
		if err != nil || len(cs) != 1 {
			return errors.Join(err, errors.New("want one active chain"))
		}
		c := cs[0]
		c.Member("g/base").State = chain.Triggered
		if err := tx.SaveChain(ctx, c); err != nil {
			return err
		}
		c.Member("g/app").Why = "waiting for g/base"
		c.Member("g/base").State = chain.MemberRunning
		return tx.SaveChain(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := storedMembers(t, dsn)
	if got["g/base"].State != chain.MemberRunning || got["g/app"].Why != "waiting for g/base" {
		t.Errorf("stored base %s, app why %q; want running and the second save's why", got["g/base"].State, got["g/app"].Why)
	}
	if err := s.CheckChainCache(ctx); err != nil {
		t.Error(err)
	}
}

func TestEveryMemberFieldIsSaved(t *testing.T) {
	forEachBackend(t, testEveryMemberFieldIsSaved)
}

// testEveryMemberFieldIsSaved changes each field of a cached chain's member
// in turn, found by reflection so that a field added to chain.Member is
// covered at once, and checks that the store holds the change: the store
// once decided what to write with a second, hand-written list of the
// fields, which a new field could slip past.
func testEveryMemberFieldIsSaved(t *testing.T, b backend) {
	s, dsn := cachedChainStore(t, b)
	ctx := t.Context()
	typ := reflect.TypeFor[chain.Member]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Project" {
			continue // the member's key
		}
		t.Run(f.Name, func(t *testing.T) {
			var want chain.Member
			err := s.UpdateChains(ctx, func(tx chain.Tx) error {
				cs, err := tx.ActiveChains(ctx)
				if err != nil || len(cs) != 1 {
					return errors.Join(err, errors.New("want one active chain"))
				}
				m := cs[0].Member("g/app")
				if err := setOther(reflect.ValueOf(m).Elem().Field(i)); err != nil {
					return err
				}
				want = *m
				return tx.SaveChain(ctx, cs[0])
			})
			if err != nil {
				t.Fatal(err)
			}
			got := storedMembers(t, dsn)["g/app"]
			if !sameFields(got, want) {
				t.Errorf("after changing %s: stored %+v, want %+v", f.Name, got, want)
			}
		})
	}
	if err := s.CheckChainCache(ctx); err != nil {
		t.Error(err)
	}
}

// setOther sets v to a value other than the one it has.
func setOther(v reflect.Value) error {
	switch v.Interface().(type) {
	case time.Time:
		tm := v.Interface().(time.Time)
		if tm.IsZero() {
			tm = t0
		}
		v.Set(reflect.ValueOf(tm.Add(1500 * time.Millisecond)))
		return nil
	case []string:
		v.Set(reflect.Append(v, reflect.ValueOf("g/other")))
		return nil
	case map[string]string:
		m := map[string]string{"r/g/other:latest": "sha256:0ther"}
		for k, x := range v.Interface().(map[string]string) {
			m[k] = x
		}
		v.Set(reflect.ValueOf(m))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 3)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	default:
		return errors.New("no other value for a field of kind " + v.Kind().String() + ": teach setOther")
	}
	return nil
}

// sameFields compares members field by field, times by instant.
func sameFields(a, b chain.Member) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if tx, ok := x.(time.Time); ok {
			if !tx.Equal(y.(time.Time)) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func TestReasonsStoredAsTheChainHasThem(t *testing.T) {
	forEachBackend(t, testReasonsStoredAsTheChainHasThem)
}

// testReasonsStoredAsTheChainHasThem: a save writes only the reasons added
// since the chain was stored, yet the store always ends up with the
// chain's reasons: added in later transactions, added twice in one, none
// added, or one changed in place.
func testReasonsStoredAsTheChainHasThem(t *testing.T, b backend) {
	s, dsn := cachedChainStore(t, b)
	ctx := t.Context()
	reason := func(project string) chain.Reason {
		return chain.Reason{Kind: chain.ReasonRebuild, Project: project, Detail: "operator", At: t0}
	}
	steps := []struct {
		name   string
		change func(c *chain.Chain, save func() error) error
	}{
		{"first reason", func(c *chain.Chain, save func() error) error {
			c.Reasons = append(c.Reasons, reason("g/base"))
			return save()
		}},
		{"none added", func(c *chain.Chain, save func() error) error { return save() }},
		{"two saves in one transaction", func(c *chain.Chain, save func() error) error {
			c.Reasons = append(c.Reasons, reason("g/lib"))
			if err := save(); err != nil {
				return err
			}
			c.Reasons = append(c.Reasons, reason("g/app"))
			return save()
		}},
		{"changed in place", func(c *chain.Chain, save func() error) error {
			c.Reasons[1].Detail = "schedule nightly"
			return save()
		}},
		{"one dropped", func(c *chain.Chain, save func() error) error {
			c.Reasons = c.Reasons[:2]
			return save()
		}},
	}
	for _, step := range steps {
		var want []chain.Reason
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			cs, err := tx.ActiveChains(ctx)
			if err != nil || len(cs) != 1 {
				return errors.Join(err, errors.New("want one active chain"))
			}
			c := cs[0]
			err = step.change(c, func() error { return tx.SaveChain(ctx, c) })
			want = slices.Clone(c.Reasons)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := storedChain(t, dsn).Reasons; !slices.EqualFunc(got, want, sameReason) {
			t.Errorf("%s: stored reasons %+v, want %+v", step.name, got, want)
		}
	}
}

func TestProjectLookUpsFollowScansOfAnyProcess(t *testing.T) {
	forEachBackend(t, testProjectLookUpsFollowScansOfAnyProcess)
}

// testProjectLookUpsFollowScansOfAnyProcess: the engine's look-ups of
// projects are cached by the process, yet a scan applied by another
// process (a replica) is seen by the next transaction: a changed default
// branch, a project added and one removed.
func testProjectLookUpsFollowScansOfAnyProcess(t *testing.T, b backend) {
	s, dsn := b.openTemp(t)
	ctx := t.Context()
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	projects := sampleProjects()
	if err := other.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	lookUp := func(paths ...string) map[string]string {
		t.Helper()
		got := map[string]string{}
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			if _, err := tx.ActiveChains(ctx); err != nil {
				return err
			}
			for _, path := range paths {
				p, ok, err := tx.Project(ctx, path)
				if err != nil {
					return err
				}
				if ok {
					got[path] = fmt.Sprintf("%d@%s", p.ID, p.DefaultBranch)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[string]string{"group/base": "10@main", "group/app": "20@master"}
	for range 2 { // the second time from the cache
		if got := lookUp("group/base", "group/app", "group/new"); !reflect.DeepEqual(got, want) {
			t.Fatalf("projects %v, want %v", got, want)
		}
	}
	projects[0].DefaultBranch = "develop"
	projects[1] = scan.Project{ID: 40, Path: "group/new", DefaultBranch: "main"}
	if err := other.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"group/base": "10@develop", "group/new": "40@main"}
	if got := lookUp("group/base", "group/app", "group/new"); !reflect.DeepEqual(got, want) {
		t.Errorf("after another process's scan: projects %v, want %v", got, want)
	}
}
