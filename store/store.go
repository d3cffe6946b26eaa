// Package store persists what depsd knows between runs: the projects a scan
// found, their dependency files, dependencies and warnings, scan metadata,
// the chains with their members, the outbox of pipelines to create, the
// inbox of webhook events, and schedule and image-digest state. The default
// backend is one SQLite file (pure Go, no cgo) in WAL mode, so `depsd scan`,
// `depsd rebuild` and a running `depsd serve` can use the same file at the
// same time. It implements the interfaces the chain and scheduler packages
// declare, with their types.
//
// The second backend is PostgreSQL (a postgres:// or postgresql:// URL, for
// several `depsd serve` replicas on one database). Both run the same SQL:
// standard DDL, $N placeholders and INSERT ... ON CONFLICT. What differs is
// in one table, dialect (dialect.go): how a write transaction serialises
// with the others, how a read sees one snapshot, and the few DDL words that
// differ. Times are stored as the same fixed-width text on both, so a copy
// between them (Copy, `depsd migrate-state`) is exact. Consumers declare the
// small interfaces they need over *Store, as ARCHITECTURE.md asks; this package
// does not export one.
//
// What it holds: persistence: SQLite (one file) or
// PostgreSQL (replicas), one SQL, the differences in one dialect table
// (`store/dialect.go`); replica registry and leader lease; the generated
// webhook signing token (`webhook_signing`, one row shared by replicas);
// what hooks sync last installed on every hook (`hook_secrets`: until it
// names the current secrets, the shared one is still accepted); the
// digests seen per image and the latest verification per project, image
// and platform (`store/verifications.go`); on PostgreSQL a transaction
// that queues a verification notifies `depsd_verify` and
// `WatchVerifyQueue` listens (`store/listen.go`), so the leader verifies a
// success another replica applied at once; per project the images its
// Containerfile's built stage is `FROM` (`projects.built`, written by each
// scan; `store.VerifyProjects` reads only what verification needs: no
// files); a project's other nodes (`project_refs`, their files and
// dependencies told apart by a `node` column, `store/nodes.go`) and the
// publications seen (`seen_publications`); what each chain's commit status
// should show and what GitLab is known to show (`chain_statuses`,
// `store/statuses.go`), and each project's visibility; what depsd wrote to
// GitLab per chain (`chain_writes`, `store/pins.go`); the merge requests
// validated and the branch pipelines that may be candidates
// (`mr_validations`, `branch_candidates`, a chain's `kind` and
// `validation`, a status's `name`: `store/premerge.go`); `Copy` for `depsd
// migrate-state`
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Store is a handle on one database. It is safe for concurrent use by many
// goroutines, and several Stores (in one process or several) may use the
// same database at once: writers wait for each other (up to the busy
// timeout on SQLite, on an advisory lock on PostgreSQL).
type Store struct {
	// gate queues this process's writers (gate.go).
	gate *writeGate
	// chains caches the active chains between UpdateChains (chaincache.go).
	chains *chainCache
	// ckpt copies SQLite's WAL back into the database off the write path
	// (checkpoint.go); nil on PostgreSQL.
	ckpt *checkpointer
	// db serves reads (and, on PostgreSQL, writes too).
	db *sql.DB
	// wdb is SQLite's one writer connection: the write gate lets one
	// transaction of this process write at a time anyway, and a
	// connection that only this process's writes go through keeps its
	// page cache and prepared statements (stmts) from one transaction to
	// the next, where a pool would hand each write a connection whose
	// cache another one's write made stale. On PostgreSQL it is db.
	wdb   *sql.DB
	stmts *stmtCache // nil on PostgreSQL
	// projects keeps the stored projects between scans
	// (projectscache.go).
	projects *projectsCache
	path     string // as given, for SQLite; the URL without its password for PostgreSQL
	dialect  dialect
}

// Kind names a store backend.
type Kind string

// The backends.
const (
	KindSQLite   Kind = "sqlite"
	KindPostgres Kind = "postgres"
)

// KindOf tells which backend Open picks for dsnOrPath: a postgres:// or
// postgresql:// URL is PostgreSQL, anything else a SQLite file path.
func KindOf(dsnOrPath string) Kind {
	l := strings.ToLower(dsnOrPath)
	if strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://") {
		return KindPostgres
	}
	return KindSQLite
}

// Open opens the store at dsnOrPath and brings its schema up to date: a
// SQLite file (created if it does not exist), or a PostgreSQL database
// given by a postgres:// or postgresql:// URL (which must exist; depsd
// creates its tables). Opening an up-to-date store changes nothing, so
// every command may call Open. A file that is not a depsd database, a
// database that cannot be reached, or one migrated by a newer depsd is an
// error naming it (never with its password).
func Open(ctx context.Context, dsnOrPath string) (*Store, error) {
	if dsnOrPath == "" {
		return nil, errors.New("open store: empty path")
	}
	var s *Store
	switch KindOf(dsnOrPath) {
	case KindPostgres:
		name := redactURL(dsnOrPath)
		db, err := openPostgres(ctx, dsnOrPath)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", name, err)
		}
		s = &Store{db: db, wdb: db, path: name, dialect: postgresDialect, gate: &writeGate{}, chains: newChainCache(),
			projects: newProjectsCache()}
	default:
		db, err := openSQLite(ctx, dsnOrPath, 4)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", dsnOrPath, err)
		}
		wdb, err := openSQLite(ctx, dsnOrPath, 1)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: %w", dsnOrPath, err)
		}
		s = &Store{db: db, wdb: wdb, stmts: newStmtCache(wdb), path: dsnOrPath, dialect: sqliteDialect,
			gate: &writeGate{}, chains: newChainCache(), projects: newProjectsCache()}
		s.ckpt = startCheckpointer(db, wdb, s.gate, ckptEvery, ckptRestartFrames)
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", s.path, err)
	}
	return s, nil
}

// Close releases the database. In-flight calls must have returned.
func (s *Store) Close() error {
	if s.ckpt != nil {
		s.ckpt.stop()
	}
	s.chains.clear()
	s.projects.clear()
	if s.stmts != nil {
		s.stmts.close()
	}
	if s.wdb != s.db {
		s.wdb.Close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// Path returns the file the store was opened on, or its URL without the
// password.
func (s *Store) Path() string { return s.path }

// Kind returns the store's backend.
func (s *Store) Kind() Kind { return s.dialect.kind }

// Ping checks that the database answers (readiness probes).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store %s: %w", s.path, err)
	}
	return nil
}

// write runs fn in a transaction that takes the write lock when it begins,
// and commits it if fn succeeds. Taking the lock up front (BEGIN IMMEDIATE in
// SQLite, an advisory lock on PostgreSQL: see dialect) is what makes
// concurrent writers wait for each other instead of failing: a transaction
// that read first and then tries to write cannot wait.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.inTx(ctx, nil, fn)
}

// inTx runs fn in a transaction on a connection of its own, commits it if
// fn succeeds and opts is not read-only, and otherwise rolls it back; in
// every case the connection goes back to the pool with no transaction open.
func (s *Store) inTx(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	return s.inConnTx(ctx, opts, func(_ *sql.Conn, tx *sql.Tx) error { return fn(tx) })
}

// writeConn is write for fn that also needs the transaction's connection
// (pipeline.go).
func (s *Store) writeConn(ctx context.Context, fn func(*sql.Conn, *sql.Tx) error) error {
	return s.inConnTx(ctx, nil, fn)
}

// inConnTx is inTx, with the connection passed to fn as well.
func (s *Store) inConnTx(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Conn, *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	readOnly := opts != nil && opts.ReadOnly
	if !readOnly {
		if noWait, _ := ctx.Value(noWaitKey{}).(bool); noWait {
			if !s.gate.tryAcquire() {
				return errGateBusy
			}
		} else if err := s.gate.acquire(ctx, isUrgent(ctx)); err != nil {
			return err
		}
		defer s.gate.release()
		if s.stmts != nil {
			// After the connection went back, before the next writer.
			defer s.stmts.prepareWanted(context.WithoutCancel(ctx))
		}
	}
	txCtx, cancel := detached(ctx)
	defer cancel()
	db := s.db
	if !readOnly {
		db = s.wdb
	}
	conn, err := db.Conn(txCtx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(txCtx, s.dialect.txOptions(readOnly))
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(conn, tx); err != nil || (opts != nil && opts.ReadOnly) {
		if rerr := tx.Rollback(); rerr != nil {
			endTransaction(conn)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		endTransaction(conn)
		return fmt.Errorf("commit: %w", err)
	}
	if s.ckpt != nil {
		s.ckpt.wrote()
	}
	return nil
}

// endTransaction makes sure a connection whose COMMIT or ROLLBACK failed
// holds no transaction. A statement canceled through its context
// interrupts the SQLite connection, and the interrupt can land on the
// ROLLBACK that follows: the transaction, and the write lock with it, would
// stay open on a pooled connection and stall every other writer. Roll back
// again, or drop the connection (closing it ends the transaction).
func endTransaction(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err == nil || strings.Contains(err.Error(), "no transaction is active") {
		return
	}
	conn.Raw(func(any) error { return driver.ErrBadConn })
}

// detached is the context a transaction is bound to: not canceled with
// ctx, so that shutting down never leaves database/sql to roll a
// transaction back behind the store's back (a connection closed that way
// can keep SQLite's write lock and stall every other writer); bounded so a
// stuck transaction still ends. Statements inside still get ctx: canceling
// it fails the statement, and write/read roll back in order.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*busyTimeoutMillis*time.Millisecond)
}

// read runs fn in a read-only transaction: its queries see one snapshot even
// while another process writes, and it never blocks writers.
func (s *Store) read(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.inTx(ctx, &sql.TxOptions{ReadOnly: true}, fn)
}

// timeLayout is fixed-width UTC with nanoseconds, so stored times sort as
// strings and round-trip exactly; a database-neutral text form keeps the
// schema portable and readable with the sqlite3 shell.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// encodeTime stores the zero time as NULL ("unknown").
func encodeTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// errIsNotFound reports whether err means a missing row.
func errIsNotFound(err error) bool { return errors.Is(err, sql.ErrNoRows) }

func decodeTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, s.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("decode time %q: %w", s.String, err)
	}
	return t, nil
}
