package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// The last webhook check is stored whole and replaced by the next: every
// replica's health page reads the same one.
func TestHookCheckRoundTrip(t *testing.T) { forEachBackend(t, testHookCheckRoundTrip) }

func testHookCheckRoundTrip(t *testing.T, b backend) {
	s, dsn := b.openTemp(t)
	ctx := t.Context()
	if _, ok, err := s.HookCheck(ctx); err != nil || ok {
		t.Fatalf("HookCheck on a new store = %v, %v; want none", ok, err)
	}
	first := HookCheck{URL: "https://depsd.example.com/hooks/gitlab", CheckedAt: t0, Err: "g/gone: 404 Not Found",
		Report: gitlab.HookReport{DryRun: true, Changes: []gitlab.HookChange{
			{Project: "g/a", ProjectID: 1, HookID: 10, Action: gitlab.HookUnchanged},
			{Project: "g/b", ProjectID: 2, HookID: 20, Action: gitlab.HookStillDisabled,
				Reasons: []string{"disabled by GitLab (disabled)", "test delivery failed: 502"}},
			{Project: "g/c", ProjectID: 3, Action: gitlab.HookCreated},
		}}}
	if err := s.SaveHookCheck(ctx, first); err != nil {
		t.Fatal(err)
	}
	// Another process on the same store (another replica) reads it.
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got, ok, err := other.HookCheck(ctx)
	if err != nil || !ok || !reflect.DeepEqual(got, first) {
		t.Fatalf("HookCheck = %+v, %v, %v; want %+v", got, ok, err, first)
	}
	second := HookCheck{URL: first.URL, CheckedAt: t0.Add(time.Hour),
		Report: gitlab.HookReport{Changes: []gitlab.HookChange{{Project: "g/a", ProjectID: 1, HookID: 10, Action: gitlab.HookReenabled}}}}
	if err := other.SaveHookCheck(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.HookCheck(ctx); err != nil || !ok || !reflect.DeepEqual(got, second) {
		t.Fatalf("HookCheck after a second check = %+v, %v, %v; want %+v", got, ok, err, second)
	}
	empty := HookCheck{URL: first.URL, CheckedAt: t0.Add(2 * time.Hour), Err: "list projects: 401 Unauthorized"}
	if err := s.SaveHookCheck(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.HookCheck(ctx); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("HookCheck of a failed check = %+v, %v; want %+v", got, err, empty)
	}
}
