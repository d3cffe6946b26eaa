package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// busyTimeoutMillis is how long a writer waits for another writer (the
// daemon, a concurrent `depsd scan`) before giving up. A full scan of a large
// instance is written in one transaction of a second or two.
const busyTimeoutMillis = 15000

// sqliteDSN is everything SQLite-specific about how depsd talks to its file.
// The pragmas are applied by the driver on every new connection:
//   - busy_timeout: wait for the write lock instead of failing at once;
//   - journal_mode(WAL): readers never block the writer nor the writer them;
//   - foreign_keys(1): SQLite leaves them off by default, and deleting a
//     project must delete its dependencies;
//   - synchronous(NORMAL): durable across process crashes in WAL mode, and
//     much cheaper than FULL;
//   - wal_autocheckpoint: the commit that takes the WAL past this many pages
//     copies it back into the database while holding the write lock; the
//     store's checkpointer does that off the write path long before
//     (checkpoint.go), so this is only a backstop;
//
// and _txlock=immediate makes every read-write transaction take the write
// lock when it begins (read-only ones stay deferred).
func sqliteDSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	// A file: URI, so that a path containing '?' or '#' is not mistaken
	// for query parameters.
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), OmitHost: true}
	q := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMillis),
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(NORMAL)",
		fmt.Sprintf("_pragma=wal_autocheckpoint(%d)", ckptBackstopPages),
		"_txlock=immediate",
	}
	return u.String() + "?" + strings.Join(q, "&"), nil
}

// openSQLite opens and checks the file: the driver connects lazily, so
// without the ping a non-SQLite file would only fail at the first query.
func openSQLite(ctx context.Context, path string, conns int) (*sql.DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if err := makePrivate(path); err != nil {
		return nil, err
	}
	dsn, err := sqliteDSN(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// conns: a few for reads beside a write, without opening one per
	// goroutine; one for the writes, which serialise anyway (Store.wdb).
	db.SetMaxOpenConns(conns)
	// Switching a fresh file to WAL (the DSN pragma, on the first
	// connection) answers SQLITE_BUSY at once, without the busy timeout,
	// when another process does the same: try again briefly.
	var mode string
	for attempt := 1; ; attempt++ {
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil {
			break
		}
		if attempt == 50 || !strings.Contains(err.Error(), "SQLITE_BUSY") {
			db.Close()
			return nil, describeOpenError(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("journal mode is %q, not WAL (is the file on a network filesystem?)", mode)
	}
	return db, nil
}

// checkPath catches the usual mistakes with --state before SQLite does:
// SQLite reports them all as "unable to open database file", and the driver
// adds a misleading "out of memory".
func checkPath(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return errors.New("is a directory, not a file")
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("cannot create the file: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("cannot create the file: %s is not a directory", dir)
	}
	return nil
}

// makePrivate creates the state file for its owner alone (0600), and
// takes the group's and others' permissions from an existing one and its
// -wal and -shm files: the state holds the generated webhook signing
// token. SQLite creates the -wal and -shm files with the database file's
// permissions. A file of another user is left as it is (its owner may
// have given this one read access).
func makePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("cannot create the file: %w", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(p, fi.Mode().Perm()&^0o077); err != nil && !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}

// describeOpenError adds what the operator should check to SQLite's terse
// messages.
func describeOpenError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "file is not a database"):
		return fmt.Errorf("not an SQLite database (wrong --state file?): %w", err)
	case strings.Contains(msg, "unable to open database file"):
		return fmt.Errorf("cannot create or open the file (is it or its directory writable?): %w", err)
	}
	return err
}
