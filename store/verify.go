package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

// verifyMigration adds what image verification keeps: the chain members'
// and actions' verification fields, the queue of builds to verify
// (chain.VerifyTask), the digests each image had, and the latest result
// per project, image and platform (the freshness views).
func verifyMigration() migration {
	return migration{
		version: 13,
		name:    "image verification",
		stmts: []string{
			`ALTER TABLE chain_members ADD COLUMN no_cache INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE chain_members ADD COLUMN verified TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chain_members ADD COLUMN verify_detail TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE outbox ADD COLUMN no_cache INTEGER NOT NULL DEFAULT 0`,
			// Written with the success, removed with the verdict's
			// effects: a crash in between loses nothing.
			`CREATE TABLE verify_queue (
				project TEXT NOT NULL,
				pipeline_id BIGINT NOT NULL,
				project_id BIGINT NOT NULL,
				chain_id BIGINT NOT NULL,
				queued_at TEXT NOT NULL,
				PRIMARY KEY (project, pipeline_id)
			)`,
			`CREATE INDEX verify_queue_order ON verify_queue (queued_at, project, pipeline_id)`,
			// Every digest depsd read for an image (index or manifest):
			// an image built on an earlier one is stale, not unknown.
			`CREATE TABLE image_digests_seen (
				image TEXT NOT NULL,
				digest TEXT NOT NULL,
				first_seen TEXT NOT NULL,
				last_seen TEXT NOT NULL,
				PRIMARY KEY (image, digest)
			)`,
			// The latest verification of each image a project publishes,
			// per platform; upstreams is the verdicts as JSON.
			// stale_since is when the upstream moved to the image the
			// project's image is not built on.
			`CREATE TABLE image_verifications (
				project TEXT NOT NULL,
				image TEXT NOT NULL,
				platform TEXT NOT NULL,
				state TEXT NOT NULL,
				reason TEXT NOT NULL,
				detail TEXT NOT NULL,
				digest TEXT NOT NULL,
				manifest TEXT NOT NULL,
				upstreams TEXT NOT NULL,
				pipeline_id BIGINT,
				verified_at TEXT NOT NULL,
				stale_since TEXT,
				PRIMARY KEY (project, image, platform)
			)`,
		},
	}
}

// QueueVerify implements chain.Tx.
func (t chainTx) QueueVerify(ctx context.Context, task chain.VerifyTask) error {
	err := t.tx.execLater(ctx, `INSERT INTO verify_queue (project, pipeline_id, project_id, chain_id, queued_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, pipeline_id) DO NOTHING`,
		task.Project, task.PipelineID, task.ProjectID, task.ChainID, encodeTime(task.QueuedAt))
	if err != nil {
		return fmt.Errorf("queue verification of %s pipeline %d: %w", task.Project, task.PipelineID, err)
	}
	return nil
}

// VerifyTasks implements chain.Tx.
func (t chainTx) VerifyTasks(ctx context.Context, limit int) ([]chain.VerifyTask, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT project, pipeline_id, project_id, chain_id, queued_at
		FROM verify_queue ORDER BY queued_at, project, pipeline_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("read verification queue: %w", err)
	}
	defer rows.Close()
	var out []chain.VerifyTask
	for rows.Next() {
		var task chain.VerifyTask
		var at sql.NullString
		if err := rows.Scan(&task.Project, &task.PipelineID, &task.ProjectID, &task.ChainID, &at); err != nil {
			return nil, fmt.Errorf("read verification queue: %w", err)
		}
		if task.QueuedAt, err = decodeTime(at); err != nil {
			return nil, fmt.Errorf("read verification queue: %w", err)
		}
		out = append(out, task)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read verification queue: %w", err)
	}
	return out, nil
}

// DoneVerify implements chain.Tx.
func (t chainTx) DoneVerify(ctx context.Context, project string, pipelineID int64) error {
	if err := t.tx.execLater(ctx, `DELETE FROM verify_queue WHERE project = $1 AND pipeline_id = $2`, project, pipelineID); err != nil {
		return fmt.Errorf("unqueue verification of %s pipeline %d: %w", project, pipelineID, err)
	}
	return nil
}

// RecordSeenDigest records that image (host/path:tag) named digest at at:
// an image later found built on it is stale. The first sighting is kept.
func (s *Store) RecordSeenDigest(ctx context.Context, image, digest string, at time.Time) error {
	if image == "" || digest == "" {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO image_digests_seen (image, digest, first_seen, last_seen)
			VALUES ($1, $2, $3, $3) ON CONFLICT (image, digest) DO UPDATE SET last_seen = excluded.last_seen`,
			image, digest, encodeTime(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("record digest %s of %s: %w", digest, image, err)
	}
	return nil
}

// EarlierDigests returns the digests seen for image other than current,
// newest first (by first sighting), at most limit of them: what
// verify.Upstream.Earlier wants.
func (s *Store) EarlierDigests(ctx context.Context, image, current string, limit int) ([]string, error) {
	var out []string
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT digest FROM image_digests_seen WHERE image = $1 AND digest <> $2
			ORDER BY first_seen DESC, digest LIMIT $3`, image, current, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read earlier digests of %s: %w", image, err)
	}
	return out, nil
}

// ImageVerification is the latest verification of one image a project
// publishes, for one platform: what `depsd freshness`, the API and the
// dashboard show.
type ImageVerification struct {
	Project    string    `json:"project"`
	PipelineID int64     `json:"pipeline_id,omitempty"` // the build verified; 0 when unknown
	VerifiedAt time.Time `json:"verified_at"`
	// StaleSince is when the upstream moved to the image this one is not
	// built on (its first sighting); zero unless stale. It is kept while
	// the image stays stale.
	StaleSince time.Time `json:"stale_since,omitzero"`
	verify.Result
}

// RecordVerifications stores the results of one build of project (one per
// image and platform), replacing the earlier result of each. A stale
// result keeps the StaleSince of the one before it when that was stale
// too; otherwise it is the first sighting of the upstream's current
// digest (RecordSeenDigest), or at.
func (s *Store) RecordVerifications(ctx context.Context, project string, pipelineID int64, at time.Time, results []verify.Result) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, r := range results {
			ups, err := encodeJSON(r.Upstreams)
			if err != nil {
				return err
			}
			platform := r.Platform.String()
			var since any
			if r.State == verify.StateStale {
				st, err := staleSince(ctx, tx, project, r, at)
				if err != nil {
					return err
				}
				since = encodeTime(st)
			}
			var pipeline any
			if pipelineID != 0 {
				pipeline = pipelineID
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO image_verifications (project, image, platform, state, reason, detail,
					digest, manifest, upstreams, pipeline_id, verified_at, stale_since)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
				ON CONFLICT (project, image, platform) DO UPDATE SET state = excluded.state, reason = excluded.reason,
					detail = excluded.detail, digest = excluded.digest, manifest = excluded.manifest,
					upstreams = excluded.upstreams, pipeline_id = excluded.pipeline_id,
					verified_at = excluded.verified_at, stale_since = excluded.stale_since`,
				project, r.Image, platform, string(r.State), string(r.Reason), r.Detail, r.Digest, r.Manifest, ups,
				pipeline, encodeTime(at), since)
			if err != nil {
				return fmt.Errorf("%s (%s): %w", r.Image, platform, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record verification of %s: %w", project, err)
	}
	return nil
}

// staleSince is when the stale image r became stale (RecordVerifications).
func staleSince(ctx context.Context, tx *sql.Tx, project string, r verify.Result, at time.Time) (time.Time, error) {
	var state string
	var prev sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT state, stale_since FROM image_verifications
		WHERE project = $1 AND image = $2 AND platform = $3`, project, r.Image, r.Platform.String()).Scan(&state, &prev)
	if err != nil && !errIsNotFound(err) {
		return time.Time{}, err
	}
	if err == nil && state == string(verify.StateStale) && prev.Valid {
		return decodeTime(prev)
	}
	since := at
	for _, v := range r.Upstreams {
		if v.State != verify.StateStale || v.Current == "" {
			continue
		}
		var first sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT first_seen FROM image_digests_seen WHERE image = $1 AND digest = $2`,
			v.Upstream, v.Current).Scan(&first)
		if errIsNotFound(err) {
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if t, err := decodeTime(first); err == nil && t.Before(since) {
			since = t
		}
	}
	return since, nil
}

// Verifications returns the latest verification of every image of the
// projects named (all projects when none is), stalest first: stale ones by
// StaleSince, then unknown, then fresh, each by project, image and
// platform.
func (s *Store) Verifications(ctx context.Context, projects ...string) ([]ImageVerification, error) {
	q := `SELECT project, image, platform, state, reason, detail, digest, manifest, upstreams, pipeline_id,
		verified_at, stale_since FROM image_verifications`
	var args []any
	if len(projects) > 0 {
		ph := make([]string, len(projects))
		for i, p := range projects {
			args = append(args, p)
			ph[i] = fmt.Sprintf("$%d", i+1)
		}
		q += ` WHERE project IN (` + strings.Join(ph, ", ") + `)`
	}
	q += ` ORDER BY CASE state WHEN 'stale' THEN 0 WHEN 'unknown' THEN 1 ELSE 2 END, stale_since, project, image, platform`
	var out []ImageVerification
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v ImageVerification
			var platform, state, reason, ups string
			var pipeline sql.NullInt64
			var at, since sql.NullString
			if err := rows.Scan(&v.Project, &v.Image, &platform, &state, &reason, &v.Detail, &v.Digest, &v.Manifest,
				&ups, &pipeline, &at, &since); err != nil {
				return err
			}
			v.State, v.Reason, v.PipelineID = verify.State(state), verify.Reason(reason), pipeline.Int64
			if ps, err := deps.ParsePlatforms(platform); err == nil && len(ps) == 1 {
				v.Platform = ps[0]
			}
			if err := decodeJSON(ups, &v.Upstreams); err != nil {
				return fmt.Errorf("%s %s: %w", v.Project, v.Image, err)
			}
			if v.VerifiedAt, err = decodeTime(at); err != nil {
				return err
			}
			if v.StaleSince, err = decodeTime(since); err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read verifications: %w", err)
	}
	return out, nil
}
