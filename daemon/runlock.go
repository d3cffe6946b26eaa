package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A run lock tells, on one host, whether an earlier run of a replica id is
// still alive, without waiting for its liveness lease to run out: each run
// of depsd serve holds an exclusive lock (flock) on a file named for its
// state and replica id for as long as it runs, and the kernel drops it
// when the process ends, however it ends (kill -9 included). A run that
// gets the lock knows that every earlier run of its replica id on this
// host is dead; one that does not, that another is alive here.

// errRunLocked: another live process on this host holds the run lock.
var errRunLocked = errors.New("another depsd serve of this replica id runs on this host")

// runLock is a held run lock; release it at the end of the run.
type runLock struct{ f *os.File }

// runLockPath is where the run lock of replica on state lives: beside an
// SQLite state file, else (PostgreSQL) in the system's temporary
// directory, named by a digest of the state URL (never the URL itself: it
// may carry a password) and the replica id.
func runLockPath(state, replica string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, replica)
	if !strings.Contains(state, "://") {
		return state + ".run-" + safe + ".lock"
	}
	sum := sha256.Sum256([]byte(state + "\x00" + replica))
	return filepath.Join(os.TempDir(), "depsd-run-"+hex.EncodeToString(sum[:8])+".lock")
}

// lockRun takes the run lock at path without waiting: errRunLocked when a
// live process holds it.
func lockRun(path string) (*runLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errRunLocked
		}
		return nil, fmt.Errorf("run lock %s: %w", path, err)
	}
	return &runLock{f: f}, nil
}

// release gives the lock up (the file stays: removing it could let two
// runs lock two different files).
func (l *runLock) release() {
	if l != nil {
		l.f.Close()
	}
}

// hostMark names this host in the incarnations of its runs, so that a run
// holding the run lock drops the leases of only this host's earlier runs.
func hostMark() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}
