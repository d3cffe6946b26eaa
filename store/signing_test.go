package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
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
