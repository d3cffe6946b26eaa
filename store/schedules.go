package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/scheduler"
)

// scheduleMigration adds the scheduler's state (version 3): one row per
// schedule, whose handled_until column is the compare-and-set target that
// makes each fire happen once across restarts and processes, and one row
// per watched image with the digest last seen.
func scheduleMigration() migration {
	return migration{
		version: 3,
		name:    "schedules, watched image digests",
		stmts: []string{
			// id is scheduler's stable identity of (kind, target, spec,
			// timezone). handled_until is the scheduled time up to which
			// fires are handled; a fire is claimed by moving it with
			// UPDATE ... WHERE handled_until = <the value read>.
			`CREATE TABLE schedules (
				id TEXT PRIMARY KEY,
				kind TEXT NOT NULL,
				target TEXT NOT NULL,
				spec TEXT NOT NULL,
				timezone TEXT NOT NULL,
				handled_until TEXT NOT NULL,
				last_fire TEXT,
				fired_at TEXT,
				fired_by TEXT NOT NULL,
				finished_at TEXT,
				duration_ns BIGINT NOT NULL,
				chain_id BIGINT NOT NULL,
				error TEXT NOT NULL,
				last_success TEXT,
				created_at TEXT NOT NULL
			)`,
			// image is the normalised repository:tag. next_check is the
			// claim target of a check, as handled_until is of a fire.
			`CREATE TABLE image_digests (
				image TEXT PRIMARY KEY,
				digest TEXT NOT NULL,
				checked_at TEXT,
				next_check TEXT NOT NULL,
				changed_at TEXT,
				failures INTEGER NOT NULL,
				error TEXT NOT NULL,
				error_at TEXT,
				rebuild_at TEXT,
				rebuild_outcome TEXT NOT NULL
			)`,
		},
	}
}

const scheduleColumns = `id, kind, target, spec, timezone, handled_until, last_fire, fired_at, fired_by,
	finished_at, duration_ns, chain_id, error, last_success`

// RegisterSchedule implements scheduler.Store: it inserts the schedule
// unless it exists and returns the stored row.
func (s *Store) RegisterSchedule(ctx context.Context, st scheduler.ScheduleState) (scheduler.ScheduleState, error) {
	if st.ID == "" || st.Cursor.IsZero() {
		return scheduler.ScheduleState{}, fmt.Errorf("register schedule %s: empty id or cursor", st.Target)
	}
	var out scheduler.ScheduleState
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (id, kind, target, spec, timezone, handled_until,
				fired_by, duration_ns, chain_id, error, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, '', 0, 0, '', $6)
			ON CONFLICT (id) DO NOTHING`,
			st.ID, string(st.Kind), st.Target, st.Spec, st.Timezone, encodeTime(st.Cursor))
		if err != nil {
			return err
		}
		found, err := querySchedules(ctx, tx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = $1`, st.ID)
		if err != nil {
			return err
		}
		if len(found) != 1 {
			return fmt.Errorf("the row is missing after its insert")
		}
		out = found[0]
		return nil
	})
	if err != nil {
		return scheduler.ScheduleState{}, fmt.Errorf("register schedule %s (%s): %w", st.Target, st.Spec, err)
	}
	return out, nil
}

// ScheduleStates implements scheduler.Store: every stored schedule, by
// kind and target.
func (s *Store) ScheduleStates(ctx context.Context) ([]scheduler.ScheduleState, error) {
	var out []scheduler.ScheduleState
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = querySchedules(ctx, tx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY kind, target, id`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read schedules: %w", err)
	}
	return out, nil
}

// ClaimFire implements scheduler.Store: a compare-and-set of
// handled_until from `from` to fire.
func (s *Store) ClaimFire(ctx context.Context, id string, from, fire, at time.Time, owner string) (bool, error) {
	ok, err := s.moveSchedule(ctx, `UPDATE schedules SET handled_until = $3, last_fire = $3, fired_at = $4,
			fired_by = $5, finished_at = NULL, duration_ns = 0, chain_id = 0, error = ''
		WHERE id = $1 AND handled_until = $2`,
		id, encodeTime(from), encodeTime(fire), encodeTime(at), owner)
	if err != nil {
		return false, fmt.Errorf("claim fire of schedule %s at %s: %w", id, fire.UTC().Format(time.RFC3339), err)
	}
	return ok, nil
}

// ResumeFire implements scheduler.Store: a compare-and-set on the claim
// of a fire that has no outcome.
func (s *Store) ResumeFire(ctx context.Context, id string, fire, firedAt, at time.Time, owner string) (bool, error) {
	ok, err := s.moveSchedule(ctx, `UPDATE schedules SET fired_at = $4, fired_by = $5
		WHERE id = $1 AND last_fire = $2 AND fired_at = $3 AND finished_at IS NULL`,
		id, encodeTime(fire), encodeTime(firedAt), encodeTime(at), owner)
	if err != nil {
		return false, fmt.Errorf("resume fire of schedule %s at %s: %w", id, fire.UTC().Format(time.RFC3339), err)
	}
	return ok, nil
}

// SkipFires implements scheduler.Store: it moves handled_until from `from`
// to `to` without recording a fire.
func (s *Store) SkipFires(ctx context.Context, id string, from, to time.Time) (bool, error) {
	ok, err := s.moveSchedule(ctx, `UPDATE schedules SET handled_until = $3 WHERE id = $1 AND handled_until = $2`,
		id, encodeTime(from), encodeTime(to))
	if err != nil {
		return false, fmt.Errorf("skip fires of schedule %s: %w", id, err)
	}
	return ok, nil
}

// moveSchedule runs a compare-and-set UPDATE and reports whether it won.
func (s *Store) moveSchedule(ctx context.Context, query string, args ...any) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// RecordOutcome implements scheduler.Store. The outcome is dropped if a
// later fire was claimed meanwhile: the row describes the latest fire.
func (s *Store) RecordOutcome(ctx context.Context, id string, fire time.Time, o scheduler.Outcome) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE schedules SET finished_at = $3, duration_ns = $4, chain_id = $5, error = $6,
				last_success = CASE WHEN $6 = '' THEN $3 ELSE last_success END
			WHERE id = $1 AND last_fire = $2`,
			id, encodeTime(fire), encodeTime(o.FinishedAt), int64(o.Duration), o.ChainID, o.Err)
		return err
	})
	if err != nil {
		return fmt.Errorf("record outcome of schedule %s: %w", id, err)
	}
	return nil
}

func querySchedules(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]scheduler.ScheduleState, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scheduler.ScheduleState
	for rows.Next() {
		var st scheduler.ScheduleState
		var kind string
		var cursor, lastFire, firedAt, finished, success sql.NullString
		var dur int64
		if err := rows.Scan(&st.ID, &kind, &st.Target, &st.Spec, &st.Timezone, &cursor, &lastFire, &firedAt,
			&st.FiredBy, &finished, &dur, &st.Outcome.ChainID, &st.Outcome.Err, &success); err != nil {
			return nil, err
		}
		st.Kind, st.Outcome.Duration = scheduler.Kind(kind), time.Duration(dur)
		for _, f := range []struct {
			dst *time.Time
			src sql.NullString
		}{{&st.Cursor, cursor}, {&st.LastFire, lastFire}, {&st.FiredAt, firedAt},
			{&st.Outcome.FinishedAt, finished}, {&st.LastSuccess, success}} {
			if *f.dst, err = decodeTime(f.src); err != nil {
				return nil, fmt.Errorf("schedule %s: %w", st.ID, err)
			}
		}
		out = append(out, st)
	}
	return out, rows.Err()
}
