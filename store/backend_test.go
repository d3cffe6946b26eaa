package store

import (
	"path/filepath"
	"testing"

	"gitlab.com/depsd/depsd/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// backend is one store implementation the conformance suite runs on.
type backend struct {
	name string
	// fresh returns where a new, empty store can be opened: a file path or
	// a postgres:// URL of a database of its own.
	fresh func(t *testing.T) string
}

// backends are SQLite (a temp file) and PostgreSQL (a fresh database on
// the test binary's server, see store/pgtest).
var backends = []backend{
	{name: "sqlite", fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "depsd.db") }},
	{name: "postgres", fresh: func(t *testing.T) string { return pgtest.Database(t) }},
}

// forEachBackend runs test once per backend, as a subtest named after it.
func forEachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// openTemp opens a new, empty store; it is closed when t ends.
func (b backend) openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := b.fresh(t)
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}
