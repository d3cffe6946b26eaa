// Package storetest gives tests of the store's consumers (chain,
// scheduler, ...) a fresh state on the backend the test run asks for:
// an SQLite file by default, or with DEPSD_TEST_STORE=postgres a fresh
// database on a real PostgreSQL (store/pgtest), so that the same tests show
// the engine behaves the same on both. `make test` runs them both ways.
package storetest

import (
	"os"
	"path/filepath"
	"testing"

	"gitlab.com/depsd/depsd/store/pgtest"
)

// EnvStore selects the backend: "postgres", or empty for SQLite.
const EnvStore = "DEPSD_TEST_STORE"

// Main runs a package's tests and stops the PostgreSQL server if one was
// started: func TestMain(m *testing.M) { storetest.Main(m) }.
func Main(m *testing.M) { pgtest.Main(m) }

// State returns where a fresh, empty store can be opened for t: a file
// path in t's temporary directory, or a postgres:// URL of a database of
// its own (dropped when t ends).
func State(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(EnvStore); v {
	case "", "sqlite":
		return filepath.Join(t.TempDir(), "depsd.db")
	case "postgres":
		return pgtest.Database(t)
	default:
		t.Fatalf("%s=%q: want sqlite or postgres", EnvStore, v)
		return ""
	}
}
