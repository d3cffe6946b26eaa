package store

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the statement cache: the hot path runs a few dozen
// statements; the rest (statements built with a placeholder per value)
// are run without it once the cache is full.
const maxCachedStmts = 256

// stmtCache keeps one prepared statement per query text on SQLite's writer
// connection, so that the statements every transaction of the inbox, the
// outbox and the webhook recorder runs are parsed once, not on every call:
// parsing was some 15 % of the daemon's CPU at 1,000 webhooks a second.
// (PostgreSQL's driver, pgx, caches prepared statements itself.)
//
// A statement is prepared after the transaction that first ran it ended,
// not during it: preparing takes a connection from the pool, and the
// writer's pool has one, which that transaction holds.
type stmtCache struct {
	db *sql.DB

	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get returns the prepared statement of query, or nil (and notes that it
// is wanted) when it has none yet.
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stmts[query]
	if st == nil && len(c.stmts)+len(c.wanted) < maxCachedStmts {
		c.wanted[query] = true
	}
	return st
}

// prepareWanted prepares the statements transactions asked for. It runs
// between transactions (the writer's connection is free). A statement that
// does not prepare is left out; its transaction got SQLite's error.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.wanted {
		delete(c.wanted, q)
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.stmts[q] = st
	}
}

// close closes the prepared statements, before the database closes.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// cachedTx is a transaction whose QueryContext, QueryRowContext and
// ExecContext use the statement cache when it has the query; store code
// uses it like the *sql.Tx it embeds. With a nil cache it is that Tx.
//
// With a pipeline (PostgreSQL's UpdateChains) every statement first sends
// what execLater queued (pipeline.go).
type cachedTx struct {
	*sql.Tx
	cache *stmtCache
	pipe  *pipeline
}

func (t cachedTx) stmt(ctx context.Context, query string) *sql.Stmt {
	if t.cache == nil {
		return nil
	}
	if st := t.cache.get(query); st != nil {
		return t.Tx.StmtContext(ctx, st)
	}
	return nil
}

// QueryContext runs query in the transaction, prepared once if cached.
func (t cachedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.pipe.flush(ctx); err != nil {
		return nil, err
	}
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query in the transaction, prepared once if cached.
//
// If the pipeline's statements fail, the query runs in the failed
// transaction and reports that; the pipeline's own error is the commit's.
func (t cachedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	_ = t.pipe.flush(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// ExecContext runs query in the transaction, prepared once if cached.
func (t cachedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.pipe.flush(ctx); err != nil {
		return nil, err
	}
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}
