// Package pgtest starts a real PostgreSQL server for tests (Debian's
// postgresql package: initdb into a temporary directory, pg_ctl on
// 127.0.0.1 and a free port) and hands out a fresh database per test, so
// that the store's conformance suite, the e2e tests and the benchmarks run
// against the same kind of server users have.
//
// A test binary that uses it wraps its tests with Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// The server is started on first use and stopped when the tests end.
// DEPSD_TEST_POSTGRES_URL points at an existing server instead (a URL whose
// user may CREATE DATABASE). Without the binaries, tests skip saying why,
// unless the environment expects PostgreSQL (internal/realtest: CI=true,
// DEPSD_REQUIRE, DEPSD_TEST_POSTGRES): then they fail.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"gitlab.com/depsd/depsd/internal/realtest"
)

// BinDir is where Debian's postgresql package puts its programs.
const BinDir = "/usr/lib/postgresql/15/bin"

// EnvURL names an existing server to use instead of starting one.
const EnvURL = "DEPSD_TEST_POSTGRES_URL"

// Server is one PostgreSQL server started for tests.
type Server struct {
	dir   string // data directory (also the socket directory)
	port  int
	runAs string // "postgres" when the tests run as root; "" otherwise
	admin string // URL of the maintenance database
	own   bool   // started here (false: DEPSD_TEST_POSTGRES_URL)
	// durable: PostgreSQL's own fsync setting (on), as users run it; tests
	// turn it off, which does not change what they check and saves time.
	durable bool
	dbs     atomic.Int64
}

// shared is the server of this test binary, started on first use by
// Database. Main stops it. It is test-helper state, one per binary.
var shared struct {
	once    sync.Once
	srv     *Server
	err     error
	durable bool // set by MainDurable before the tests run
}

// Main runs the tests of a package and stops the shared server, if one
// was started, before the binary exits.
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	os.Exit(code)
}

// MainDurable is Main for benchmarks: the shared server keeps
// PostgreSQL's default fsync=on, so that what a commit costs is what it
// costs users.
func MainDurable(m *testing.M) {
	shared.durable = true
	Main(m)
}

// Available reports why PostgreSQL tests cannot run here ("" when they can).
func Available() string {
	if os.Getenv(EnvURL) != "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(BinDir, "initdb")); err != nil {
		return "PostgreSQL 15 is not installed (apt-get install postgresql; " + BinDir + "/initdb missing)"
	}
	return ""
}

// Shared returns the binary's shared server, starting it on first use. It
// skips t when PostgreSQL cannot run here and is not required.
func Shared(t testing.TB) *Server {
	t.Helper()
	why := Available()
	realtest.Require(t, realtest.PostgreSQL, why == "", why)
	shared.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			shared.srv, shared.err = &Server{admin: u}, nil
			return
		}
		shared.srv, shared.err = start(context.Background(), shared.durable)
	})
	if shared.err != nil {
		t.Fatalf("start PostgreSQL: %v", shared.err)
	}
	return shared.srv
}

// Own starts a server for t alone (for tests that stop or restart it),
// stopped when t ends. It skips or fails as Shared does.
func Own(t testing.TB) *Server {
	t.Helper()
	_, err := os.Stat(filepath.Join(BinDir, "initdb"))
	realtest.Require(t, realtest.PostgreSQL, err == nil, "apt-get install postgresql: "+BinDir+"/initdb missing")
	srv, err := Start(context.Background())
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// Database creates a fresh, empty database on the shared server and
// returns its postgres:// URL. It is dropped when t ends.
func Database(t testing.TB) string {
	t.Helper()
	srv := Shared(t)
	u, err := srv.CreateDatabase(context.Background())
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.DropDatabase(context.Background(), u); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
	return u
}

// Start initialises a data directory and starts a server of its own
// (for tests that restart or stop it). Stop it with Stop.
func Start(ctx context.Context) (*Server, error) { return start(ctx, false) }

func start(ctx context.Context, durable bool) (*Server, error) {
	if _, err := os.Stat(filepath.Join(BinDir, "initdb")); err != nil {
		return nil, errors.New("PostgreSQL 15 is not installed (apt-get install postgresql)")
	}
	s := &Server{own: true, durable: durable}
	if os.Geteuid() == 0 {
		s.runAs = "postgres" // initdb refuses to run as root
	}
	dir, err := os.MkdirTemp("", "depsd-pgtest-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if s.runAs != "" {
		u, err := user.Lookup(s.runAs)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("user %s: %w", s.runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if out, err := s.run(ctx, "initdb", "-D", dir, "-A", "trust", "-U", "depsd", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.port = port
	s.admin = fmt.Sprintf("postgres://depsd@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := s.StartServer(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// URL is the server's maintenance database.
func (s *Server) URL() string { return s.admin }

// StartServer starts the server process (again) and waits until it
// accepts connections.
func (s *Server) StartServer(ctx context.Context) error {
	if out, err := s.run(ctx, "pg_ctl", "-D", s.dir, "-o", s.options(), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, s.Log())
	}
	return s.wait(ctx)
}

// options are the server's command-line settings.
func (s *Server) options() string {
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses=127.0.0.1 -c max_connections=200", s.dir, s.port)
	if !s.durable {
		opts += " -c fsync=off"
	}
	return opts
}

// StopServer stops the server process (fast shutdown), keeping its data.
func (s *Server) StopServer(ctx context.Context) error {
	if out, err := s.run(ctx, "pg_ctl", "-D", s.dir, "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Restart is `pg_ctl restart`: every connection is dropped.
func (s *Server) Restart(ctx context.Context) error {
	if out, err := s.run(ctx, "pg_ctl", "-D", s.dir, "-o", s.options(), "-l", filepath.Join(s.dir, "log"), "-m", "fast", "-w", "-t", "60", "restart"); err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s", err, out)
	}
	return s.wait(ctx)
}

// Stop stops a server started here and removes its directory.
func (s *Server) Stop() {
	if !s.own {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.run(ctx, "pg_ctl", "-D", s.dir, "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

// Log returns the server's log (for test failure messages).
func (s *Server) Log() string {
	if s.dir == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

// CreateDatabase creates an empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("depsd_test_%d_%d", os.Getpid(), s.dbs.Add(1))
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(s.admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDatabase drops a database made by CreateDatabase, closing whatever
// connections are left on it.
func (s *Server) DropDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(u.Path, "/")
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	return err
}

func (s *Server) wait(ctx context.Context) error {
	db, err := sql.Open("pgx", s.admin)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL did not accept connections: %w\n%s", err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(BinDir, prog)
	var cmd *exec.Cmd
	if s.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
