package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The generated signing token is made once and shared: a second call, a
// second process on the same state, and replicas racing at their first
// start all get the first token stored.
func TestSigningTokenIsGeneratedOnce(t *testing.T) {
	forEachBackend(t, testSigningTokenIsGeneratedOnce)
}

func testSigningTokenIsGeneratedOnce(t *testing.T, b backend) {
	s, dsn := b.openTemp(t)
	ctx := t.Context()
	var mu sync.Mutex
	n := 0
	gen := func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("whsec_token-%d", n), nil
	}
	if _, err := s.SigningToken(ctx, func() (string, error) { return "", errors.New("no entropy") }); err == nil {
		t.Fatal("a failing generator gave a token")
	}
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got := make([]string, 8)
	var wg sync.WaitGroup
	for i := range got {
		st := s
		if i%2 == 1 {
			st = other
		}
		wg.Go(func() {
			tok, err := st.SigningToken(ctx, gen)
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range got {
		if tok != got[0] || tok == "" {
			t.Fatalf("tokens differ: %q", got)
		}
	}
	again, err := other.SigningToken(ctx, gen)
	if err != nil || again != got[0] {
		t.Fatalf("later call: %q, %v; want %q", again, err, got[0])
	}
}

// TestSQLiteStateIsPrivate: the SQLite state holds the generated signing
// token, so the file and its -wal and -shm files are the owner's alone,
// whatever the umask; a state created before (0644) is made so at the
// next open.
func TestSQLiteStateIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	fresh, existing := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, nil, 0o644); err != nil { // an empty file is an empty database
		t.Fatal(err)
	}
	for _, path := range []string{fresh, existing} {
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SigningToken(t.Context(), func() (string, error) { return "whsec_x", nil }); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("%s: mode %o, want 600", filepath.Base(f), perm)
			}
		}
		s.Close()
	}
}

// What hooks sync installed on every hook is recorded once, replaced by
// the next record, and read by every process of the state.
func TestHookSecretsInstalled(t *testing.T) { forEachBackend(t, testHookSecretsInstalled) }

func testHookSecretsInstalled(t *testing.T, b backend) {
	s, dsn := b.openTemp(t)
	ctx := t.Context()
	if got, err := s.HookSecretsInstalled(ctx); err != nil || got != "" {
		t.Fatalf("before any record: %q, %v", got, err)
	}
	for _, v := range []string{"first", "second"} {
		if err := s.SaveHookSecretsInstalled(ctx, v, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, err := other.HookSecretsInstalled(ctx); err != nil || got != "second" {
		t.Errorf("another process reads %q, %v; want second", got, err)
	}
}
