package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// replicaMigration adds what several `depsd serve` processes on one store
// share (version 5): leases (the leader's, renewed while it lives), the
// last run of each background job for `depsd status`, and how far the
// catch-up has read each project's pipelines. Plain rows, so that they
// work the same on SQLite (several processes on one file) and PostgreSQL.
func replicaMigration() migration {
	return migration{
		version: 5,
		name:    "leases, job runs, catch-up cursors",
		stmts: []string{
			// One row per lease name; the holder owns it until expires_at.
			`CREATE TABLE leases (
				name TEXT PRIMARY KEY,
				holder TEXT NOT NULL,
				acquired_at TEXT NOT NULL,
				expires_at TEXT NOT NULL
			)`,
			`CREATE TABLE job_runs (
				name TEXT PRIMARY KEY,
				replica TEXT NOT NULL,
				started_at TEXT NOT NULL,
				finished_at TEXT NOT NULL,
				error TEXT NOT NULL
			)`,
			// seen_until is the updated_at (GitLab's clock) of the newest
			// pipeline the catch-up read for the project.
			`CREATE TABLE catch_up (
				project_id BIGINT PRIMARY KEY,
				seen_until TEXT NOT NULL
			)`,
			// Which process incarnation holds an action's lease (see
			// chain.Action.ClaimedBy).
			`ALTER TABLE outbox ADD COLUMN claimed_by TEXT NOT NULL DEFAULT ''`,
		},
		// Webhook events take their seq from a sequence on PostgreSQL, so
		// that recording one needs no write lock (see RecordEvents).
		postgres: []string{
			`CREATE SEQUENCE events_seq`,
			`SELECT setval('events_seq', (SELECT COALESCE(MAX(seq), 0) + 1 FROM events), false)`,
		},
	}
}

// Lease is who holds a named lease, and until when.
type Lease struct {
	Name       string
	Holder     string
	AcquiredAt time.Time // when this holder took it
	ExpiresAt  time.Time
}

// TryLease takes or renews the lease name for holder until now+ttl, if it
// is free, expired, or already holder's; otherwise it leaves it alone. It
// returns the lease as it stands afterwards, so held is
// lease.Holder == holder. Holders compare times from their own clocks:
// replicas need clocks in step (NTP) to well under ttl.
func (s *Store) TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(tx *sql.Tx) error {
		var cur Lease
		var acquired, expires sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT holder, acquired_at, expires_at FROM leases WHERE name = $1`, name).
			Scan(&cur.Holder, &acquired, &expires)
		switch {
		case errIsNotFound(err):
		case err != nil:
			return err
		default:
			if cur.AcquiredAt, err = decodeTime(acquired); err != nil {
				return err
			}
			if cur.ExpiresAt, err = decodeTime(expires); err != nil {
				return err
			}
			if cur.Holder != holder && now.Before(cur.ExpiresAt) {
				l = cur
				l.Name = name
				return nil
			}
		}
		l = Lease{Name: name, Holder: holder, AcquiredAt: now, ExpiresAt: now.Add(ttl)}
		if cur.Holder == holder && !cur.AcquiredAt.IsZero() && now.Before(cur.ExpiresAt) {
			l.AcquiredAt = cur.AcquiredAt
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at,
				expires_at = excluded.expires_at`,
			name, holder, encodeTime(l.AcquiredAt), encodeTime(l.ExpiresAt))
		return err
	})
	if err != nil {
		return Lease{}, fmt.Errorf("take lease %s: %w", name, err)
	}
	return l, nil
}

// ReleaseLease gives up the lease if holder holds it, so that another
// replica can take it at once.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaseOf returns the lease name as stored (ok false if nobody ever took
// it or it was released).
func (s *Store) LeaseOf(ctx context.Context, name string) (l Lease, ok bool, err error) {
	var acquired, expires sql.NullString
	err = s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT holder, acquired_at, expires_at FROM leases WHERE name = $1`, name).
			Scan(&l.Holder, &acquired, &expires)
	})
	if errIsNotFound(err) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("read lease %s: %w", name, err)
	}
	l.Name = name
	if l.AcquiredAt, err = decodeTime(acquired); err != nil {
		return Lease{}, false, err
	}
	if l.ExpiresAt, err = decodeTime(expires); err != nil {
		return Lease{}, false, err
	}
	return l, true, nil
}

// JobRun is the last run of a background job.
type JobRun struct {
	Name       string
	Replica    string // which replica ran it
	StartedAt  time.Time
	FinishedAt time.Time
	Err        string // empty when it succeeded
}

// RecordJobRun stores r as the last run of its job.
func (s *Store) RecordJobRun(ctx context.Context, r JobRun) error {
	if r.Name == "" {
		return errors.New("record job run: no job name")
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO job_runs (name, replica, started_at, finished_at, error)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (name) DO UPDATE SET replica = excluded.replica, started_at = excluded.started_at,
				finished_at = excluded.finished_at, error = excluded.error`,
			r.Name, r.Replica, encodeTime(r.StartedAt), encodeTime(r.FinishedAt), r.Err)
		return err
	})
	if err != nil {
		return fmt.Errorf("record run of job %s: %w", r.Name, err)
	}
	return nil
}

// JobRuns returns the last run of every job, by name.
func (s *Store) JobRuns(ctx context.Context) ([]JobRun, error) {
	var out []JobRun
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT name, replica, started_at, finished_at, error FROM job_runs ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r JobRun
			var started, finished sql.NullString
			if err := rows.Scan(&r.Name, &r.Replica, &started, &finished, &r.Err); err != nil {
				return err
			}
			if r.StartedAt, err = decodeTime(started); err != nil {
				return err
			}
			if r.FinishedAt, err = decodeTime(finished); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read job runs: %w", err)
	}
	return out, nil
}

// CatchUpCursor implements chain.Tx.
func (t chainTx) CatchUpCursor(ctx context.Context, projectID int64) (time.Time, bool, error) {
	var at sql.NullString
	err := t.tx.QueryRowContext(ctx, `SELECT seen_until FROM catch_up WHERE project_id = $1`, projectID).Scan(&at)
	if errIsNotFound(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read catch-up cursor of project %d: %w", projectID, err)
	}
	ts, err := decodeTime(at)
	return ts, err == nil, err
}

// SetCatchUpCursor implements chain.Tx.
func (t chainTx) SetCatchUpCursor(ctx context.Context, projectID int64, at time.Time) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO catch_up (project_id, seen_until) VALUES ($1, $2)
		ON CONFLICT (project_id) DO UPDATE SET seen_until = excluded.seen_until`, projectID, encodeTime(at))
	if err != nil {
		return fmt.Errorf("write catch-up cursor of project %d: %w", projectID, err)
	}
	return nil
}

var _ chain.Tx = chainTx{}

// LiveLeases returns the leases whose name starts with prefix and that
// have not expired at now (the replicas alive, for `depsd status`).
func (s *Store) LiveLeases(ctx context.Context, prefix string, now time.Time) ([]Lease, error) {
	var out []Lease
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT name, holder, acquired_at, expires_at FROM leases
			WHERE substr(name, 1, $1) = $2 AND expires_at > $3 ORDER BY name`, len(prefix), prefix, encodeTime(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l Lease
			var acquired, expires sql.NullString
			if err := rows.Scan(&l.Name, &l.Holder, &acquired, &expires); err != nil {
				return err
			}
			if l.AcquiredAt, err = decodeTime(acquired); err != nil {
				return err
			}
			if l.ExpiresAt, err = decodeTime(expires); err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read leases %s*: %w", prefix, err)
	}
	return out, nil
}

// PruneLeases deletes the leases whose name starts with prefix that
// expired before before (liveness leases of processes long gone).
func (s *Store) PruneLeases(ctx context.Context, prefix string, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE substr(name, 1, $1) = $2 AND expires_at < $3`,
			len(prefix), prefix, encodeTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune leases %s*: %w", prefix, err)
	}
	return int(n), nil
}

// DropLease deletes the lease l.Name if it still is as l describes it:
// the same holder and expiry. A lease renewed (or released and taken
// again) since l was read is left alone, and dropped is false. A replica
// restarted under the same id drops its earlier run's liveness lease this
// way once that run has been found dead, so that what it had claimed is
// taken over without waiting for the rest of the lease, while a lease
// renewed at that very moment, by a live process, survives.
func (s *Store) DropLease(ctx context.Context, l Lease) (dropped bool, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2 AND expires_at = $3`,
			l.Name, l.Holder, encodeTime(l.ExpiresAt))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		dropped = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("drop lease %s: %w", l.Name, err)
	}
	return dropped, nil
}
