package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// RecordSeen records that node's pipeline pipelineID pushed image (a tag
// downstreams name, host/path:tag): later scans map that reference to
// node (deps.NodeResolver, EdgeSeen). It reports whether that changed
// what the store said of image.
func (s *Store) RecordSeen(ctx context.Context, image, node string, pipelineID int64, at time.Time) (bool, error) {
	changed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		var old string
		err := tx.QueryRowContext(ctx, `SELECT node FROM seen_publications WHERE image = $1`, image).Scan(&old)
		if err != nil && !errIsNotFound(err) {
			return err
		}
		changed = old != node
		_, err = tx.ExecContext(ctx, `INSERT INTO seen_publications (image, node, pipeline_id, seen_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (image) DO UPDATE SET node = excluded.node, pipeline_id = excluded.pipeline_id, seen_at = excluded.seen_at`,
			image, node, pipelineID, encodeTime(at))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record %s seen published by %s: %w", image, node, err)
	}
	return changed, nil
}

// SeenPublications returns, by image, the node that last pushed it and
// in which pipeline (RecordSeen).
func (s *Store) SeenPublications(ctx context.Context) (map[string]deps.Seen, error) {
	out := map[string]deps.Seen{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT image, node, pipeline_id FROM seen_publications`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var image string
			var sp deps.Seen
			if err := rows.Scan(&image, &sp.Node, &sp.PipelineID); err != nil {
				return err
			}
			out[image] = sp
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read seen publications: %w", err)
	}
	return out, nil
}
