package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// beginWrite begins a PostgreSQL write transaction and takes depsd's write
// lock, in one simple-protocol query: one round trip, where BEGIN and the
// lock as two statements cost two, both paid by every writer in line.
var beginWrite = beginReadCommitted + "; SELECT pg_advisory_xact_lock(" +
	strconv.FormatInt(writeLockKey, 10) + ")"

const beginReadCommitted = "BEGIN ISOLATION LEVEL READ COMMITTED"

// writeLockKey is the advisory lock every PostgreSQL write transaction of
// depsd takes: an arbitrary constant ("depsd" in ASCII), unlikely to clash
// with another application's locks on the same database.
const writeLockKey = 0x6465707364

// lockingConnector hands out pgx's database/sql connections whose read-write
// transactions begin as SQLite's do with _txlock=immediate: holding the
// write lock (dialect).
type lockingConnector struct{ driver.Connector }

func (c lockingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	conn, ok := dc.(*stdlib.Conn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("PostgreSQL connection is a %T, not pgx's", dc)
	}
	return lockingConn{conn}, nil
}

// lockingConn is pgx's connection (every method of *stdlib.Conn) with
// BeginTx taking the write lock for a read-write transaction.
type lockingConn struct{ *stdlib.Conn }

// pgxConn is the pgx connection under database/sql's.
func (c lockingConn) pgxConn() *pgx.Conn { return c.Conn.Conn() }

func (c lockingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		return c.Conn.BeginTx(ctx, opts)
	}
	if sql.IsolationLevel(opts.Isolation) != sql.LevelDefault {
		return nil, errors.New("depsd's PostgreSQL write transactions are READ COMMITTED behind the write lock")
	}
	pc := c.pgxConn()
	if pc.IsClosed() {
		return nil, driver.ErrBadConn
	}
	ra, _ := ctx.Value(readAheadKey{}).(*readAhead)
	var err error
	if ra != nil && len(ra.then) > 0 {
		err = ra.beginBatch(ctx, pc)
	} else {
		err = beginSimple(ctx, pc, ra)
	}
	if err != nil {
		if !pc.IsClosed() && pc.PgConn().TxStatus() != 'I' {
			_, _ = pc.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return nil, fmt.Errorf("take the write lock: %w", err)
	}
	return lockedTx{ctx: ctx, conn: pc}, nil
}

// readAhead is what a write transaction reads in the round trip that
// begins it and takes the lock (withReadAhead): the active chains'
// versions (activeVersionsQuery), which every transaction of the chain
// engine reads first, and the statements of then. ok is false until the
// versions are read, and once the transaction took them (take).
type readAhead struct {
	versions []versionRow
	ok       bool
	// then are statements with parameters to send after the versions'
	// query: the transaction then begins with one pgx batch of prepared
	// statements (beginBatch) instead of the simple query.
	then []aheadStatement
	// tryLock: the batch only tries the write lock (a recording sent
	// with the BEGIN, which needs no lock); busy: another session held
	// it, so the statements ran without it and only the recording may
	// be kept.
	tryLock, busy bool
}

// aheadStatement is a statement sent with the BEGIN, and what reads its
// rows.
type aheadStatement struct {
	query string
	args  []any
	read  func(rowScanner) error
}

// beginSimple begins the transaction, takes the lock and, if ra is not
// nil, reads the versions, as one simple-protocol query (the versions'
// query has no parameters, so that it can go there).
func beginSimple(ctx context.Context, pc *pgx.Conn, ra *readAhead) error {
	begin := beginWrite
	if ra != nil {
		begin += "; " + activeVersionsQuery
	}
	results, err := pc.PgConn().Exec(ctx, begin).ReadAll()
	if err != nil || ra == nil {
		return err
	}
	ra.versions, err = parseVersions(results[len(results)-1].Rows)
	ra.ok = err == nil
	return err
}

// beginBatch begins the transaction, takes the lock, reads the versions
// and runs ra.then as one pgx batch: one round trip, each statement
// prepared on the connection (a simple query with the values as literals
// plans them every time, which cost more than the round trips saved).
func (ra *readAhead) beginBatch(ctx context.Context, pc *pgx.Conn) error {
	versions := aheadStatement{query: activeVersionsQuery, read: func(rows rowScanner) (err error) {
		ra.versions, err = scanVersions(rows)
		return err
	}}
	stmts := append([]aheadStatement{versions}, ra.then...)
	var b pgx.Batch
	b.Queue(beginReadCommitted)
	if ra.tryLock {
		b.Queue("SELECT pg_try_advisory_xact_lock($1)", int64(writeLockKey))
	} else {
		b.Queue("SELECT pg_advisory_xact_lock($1)", int64(writeLockKey))
	}
	for _, st := range stmts {
		b.Queue(st.query, st.args...)
	}
	br := pc.SendBatch(ctx, &b)
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if ra.tryLock {
			var locked bool
			if err := br.QueryRow().Scan(&locked); err != nil {
				return err
			}
			ra.busy = !locked
		} else if _, err := br.Exec(); err != nil {
			return err
		}
		for _, st := range stmts {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			err = st.read(rows)
			rows.Close()
			if err := errors.Join(err, rows.Err()); err != nil {
				return err
			}
		}
		return nil
	}()
	if err = errors.Join(err, br.Close()); err == nil {
		ra.ok = true
	}
	return err
}

// readAheadKey is the context key of a write transaction's readAhead.
type readAheadKey struct{}

// withReadAhead makes the PostgreSQL write transaction begun with ctx read
// ra in the round trip that begins it: what every transaction of the
// chain engine reads first costs no round trip of its own.
func withReadAhead(ctx context.Context, ra *readAhead) context.Context {
	return context.WithValue(ctx, readAheadKey{}, ra)
}

// take returns the versions read ahead, once: false if there are none
// (not PostgreSQL, or taken already).
func (ra *readAhead) take() ([]versionRow, bool) {
	if ra == nil || !ra.ok {
		return nil, false
	}
	ra.ok = false
	return ra.versions, true
}

// lockedTx is a write transaction begun by lockingConn. Its Commit has
// nothing to do when the transaction already ended: a pipelined
// transaction sends COMMIT with its last batch (pipeline.commit).
type lockedTx struct {
	ctx  context.Context
	conn *pgx.Conn
}

func (t lockedTx) Commit() error {
	tag, err := t.end("COMMIT")
	if err == nil && tag.String() == "ROLLBACK" {
		return errRolledBack
	}
	return err
}

func (t lockedTx) Rollback() error {
	_, err := t.end("ROLLBACK")
	return err
}

// end sends stmt, COMMIT or ROLLBACK, unless the transaction has ended.
func (t lockedTx) end(stmt string) (pgconn.CommandTag, error) {
	if t.conn.IsClosed() {
		return pgconn.CommandTag{}, driver.ErrBadConn
	}
	if t.conn.PgConn().TxStatus() == 'I' {
		return pgconn.CommandTag{}, nil
	}
	return t.conn.Exec(t.ctx, stmt)
}

// errRolledBack is a COMMIT that PostgreSQL answered with ROLLBACK: a
// statement of the transaction had failed.
var errRolledBack = errors.New("PostgreSQL rolled the transaction back: a statement in it had failed")
