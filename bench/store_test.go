package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"gitlab.com/depsd/depsd/store/pgtest"
)

// The benchmarks run PostgreSQL with fsync on, as users do.
// With receiverRole set, the binary is one receiver of a benchmark
// instead (startReceiverProcess).
func TestMain(m *testing.M) {
	if role := os.Getenv(receiverRole); role != "" {
		os.Exit(serveReceiverRole(role, os.Getenv(receiverState)))
	}
	pgtest.MainDurable(m)
}

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

// benchRequestsPerMinute is the daemon's client rate limit: the default a
// user gets, unless DEPSD_BENCH_REQUESTS_PER_MINUTE says otherwise (-1
// lifts it), to show what the engine does when the rate limit is not what
// bounds it. Figures measured so say it.
func benchRequestsPerMinute(b *testing.B, def int) int {
	v := os.Getenv("DEPSD_BENCH_REQUESTS_PER_MINUTE")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("DEPSD_BENCH_REQUESTS_PER_MINUTE=%q: %v", v, err)
	}
	b.Logf("client rate limit %d requests/min (DEPSD_BENCH_REQUESTS_PER_MINUTE), not the default %d", n, def)
	return n
}

// scaled is n times DEPSD_BENCH_SCALE (default 1): the benchmarks of
// issue 30's sizes run smaller with it (e.g. 0.1) to try them out or
// profile them. Figures measured so say it (benchdoc records the
// setting).
func scaled(b *testing.B, n int) int {
	f, set := positiveEnv(b, "DEPSD_BENCH_SCALE", "a positive number")
	if !set {
		return n
	}
	return max(1, int(float64(n)*f))
}

// positiveEnv reads the positive number in the environment variable name;
// set is false when it is unset. Anything else fails b, saying want.
func positiveEnv(b *testing.B, name, want string) (f float64, set bool) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		b.Fatalf("%s=%q: want %s", name, v, want)
	}
	return f, true
}
