package bench

import (
	"os"
	"path/filepath"
	"testing"

	"gitlab.com/depsd/depsd/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// benchState is where a benchmark's daemon keeps its state: an SQLite file,
// or with DEPSD_BENCH_STORE=postgres a fresh database on a PostgreSQL the
// benchmarks start (store/pgtest).
func benchState(b *testing.B) string {
	if os.Getenv("DEPSD_BENCH_STORE") == "postgres" {
		return pgtest.Database(b)
	}
	return filepath.Join(b.TempDir(), "depsd.db")
}

// storeKind names the backend benchState picks, for the figures' lines.
func storeKind() string {
	if os.Getenv("DEPSD_BENCH_STORE") == "postgres" {
		return "postgres"
	}
	return "sqlite"
}
