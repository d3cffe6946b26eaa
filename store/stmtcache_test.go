package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

// TestStmtCachePreparesBetweenTransactions: a statement a write
// transaction runs is prepared once that transaction ended (the writer's
// one connection was free) and used by the next ones; a statement that
// does not prepare fails its transaction each time with SQLite's error,
// without deadlocking the writer.
func TestStmtCachePreparesBetweenTransactions(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	count := func() int {
		var n int
		err := s.UpdateChains(t.Context(), func(tx chain.Tx) error {
			n, err = tx.CountEvents(t.Context())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const q = `SELECT COUNT(*) FROM events WHERE processed_at IS NULL`
	count()
	s.stmts.mu.Lock()
	st := s.stmts.stmts[q]
	s.stmts.mu.Unlock()
	if st == nil {
		t.Fatalf("CountEvents' statement was not prepared after its transaction; cached: %v", s.stmts.stmts)
	}
	count()
	s.stmts.mu.Lock()
	again := s.stmts.stmts[q]
	s.stmts.mu.Unlock()
	if again != st {
		t.Error("the next transaction prepared the statement again")
	}
	for range 2 {
		err := s.write(t.Context(), func(tx *sql.Tx) error {
			_, err := cachedTx{Tx: tx, cache: s.stmts}.ExecContext(context.Background(), `UPDATE no_such_table SET x = 1`)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "no_such_table") {
			t.Fatalf("a statement that cannot be prepared: err = %v, want SQLite's error", err)
		}
	}
	if n := count(); n != 0 {
		t.Errorf("%d events, want 0", n)
	}
}
