package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pipeline holds back the statements of a PostgreSQL write transaction
// whose results nothing reads (members, reasons, chain rows, actions,
// "processed" marks) and sends them together, as one pgx batch in one
// round trip, before the transaction's next statement and with its
// commit. Every statement still runs, in order, in the same transaction;
// only when an error is seen moves: to the next statement, or the commit.
// An inbox event used to cost four or five round trips under the write
// lock, at 0.1–0.3 ms each on a loaded machine; now it costs its look-ups.
type pipeline struct {
	conn  *sql.Conn
	queue []queued
	err   error // the first failure of a batch: the transaction is void
}

type queued struct {
	query string
	args  []any
}

// execLater runs query now, or, in a pipelined transaction, queues it.
func (t cachedTx) execLater(ctx context.Context, query string, args ...any) error {
	if t.pipe == nil {
		_, err := t.ExecContext(ctx, query, args...)
		return err
	}
	if t.pipe.err != nil {
		return t.pipe.err
	}
	t.pipe.queue = append(t.pipe.queue, queued{query, args})
	return nil
}

// flush sends the queued statements. A failure voids the transaction:
// it is returned now and by every later flush, and so by the commit.
func (p *pipeline) flush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if p.err != nil || len(p.queue) == 0 {
		return p.err
	}
	q := p.queue
	p.queue = nil
	p.err = p.conn.Raw(func(dc any) error {
		c, ok := dc.(lockingConn)
		if !ok {
			return fmt.Errorf("pipelined statements need pgx's connection, not %T", dc)
		}
		var b pgx.Batch
		for _, e := range q {
			b.Queue(e.query, e.args...)
		}
		br := c.pgxConn().SendBatch(ctx, &b)
		for _, e := range q {
			tag, err := br.Exec()
			if err == nil && e.query == "COMMIT" && tag.String() == "ROLLBACK" {
				err = errRolledBack
			}
			if err != nil {
				return errors.Join(fmt.Errorf("%s…: %w", firstWords(e.query), err), br.Close())
			}
		}
		return br.Close()
	})
	return p.err
}

// commit sends the queued statements and COMMIT as the transaction's last
// batch: the commit costs no round trip of its own (the driver's Commit
// then finds the transaction ended, lockedTx).
func (p *pipeline) commit(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if p.err == nil {
		p.queue = append(p.queue, queued{query: "COMMIT"})
	}
	return p.flush(ctx)
}

// firstWords names a statement in an error: its first line, shortened.
func firstWords(q string) string {
	q, _, _ = strings.Cut(strings.TrimSpace(q), "\n")
	if len(q) > 60 {
		q = q[:60]
	}
	return q
}
