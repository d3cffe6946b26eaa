package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

const projectColumns = `id, path, default_branch, registry_prefix, web_url, head_commit, last_activity,
	head_checked_at, searched_files, file, scanned_at, pipeline_ident, built, refs_rule, visibility`

// Projects returns every stored project, sorted by path, with its files,
// dependencies and warnings in order. It costs four queries whatever the
// number of projects, all in one snapshot.
func (s *Store) Projects(ctx context.Context) ([]scan.Project, error) {
	var out []scan.Project
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = readProjects(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read projects: %w", err)
	}
	return out, nil
}

// readProjects reads every stored project with its details, by path.
func readProjects(ctx context.Context, tx *sql.Tx) ([]scan.Project, error) {
	out, err := queryProjects(ctx, tx, `SELECT `+projectColumns+` FROM projects ORDER BY path`)
	if err != nil {
		return nil, err
	}
	index := make(map[int64]*scan.Project, len(out))
	for i := range out {
		index[out[i].ID] = &out[i]
	}
	return out, loadDetails(ctx, tx, index, "")
}

// Project returns the stored project at path, or an error wrapping
// ErrNotFound.
func (s *Store) Project(ctx context.Context, path string) (scan.Project, error) {
	var p scan.Project
	err := s.read(ctx, func(tx *sql.Tx) error {
		found, err := queryProjects(ctx, tx, `SELECT `+projectColumns+` FROM projects WHERE path = $1`, path)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return scan.ErrNotFound
		}
		p = found[0]
		return loadDetails(ctx, tx, map[int64]*scan.Project{p.ID: &p}, ` WHERE project_id = $1`, p.ID)
	})
	if err != nil {
		return scan.Project{}, fmt.Errorf("read project %s: %w", path, err)
	}
	return p, nil
}

func queryProjects(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]scan.Project, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scan.Project
	for rows.Next() {
		var p scan.Project
		var activity, checked, scanned sql.NullString
		var searched, built string
		if err := rows.Scan(&p.ID, &p.Path, &p.DefaultBranch, &p.RegistryPrefix, &p.WebURL,
			&p.HeadCommit, &activity, &checked, &searched, &p.File, &scanned, &p.PipelineIdent, &built, &p.RefsRule,
			&p.Visibility); err != nil {
			return nil, err
		}
		if p.LastActivity, err = decodeTime(activity); err != nil {
			return nil, fmt.Errorf("project %s: %w", p.Path, err)
		}
		if p.HeadCheckedAt, err = decodeTime(checked); err != nil {
			return nil, fmt.Errorf("project %s: %w", p.Path, err)
		}
		if p.ScannedAt, err = decodeTime(scanned); err != nil {
			return nil, fmt.Errorf("project %s: %w", p.Path, err)
		}
		if p.SearchedFiles, err = decodeNames(searched); err != nil {
			return nil, fmt.Errorf("project %s: searched files: %w", p.Path, err)
		}
		if p.Built, err = decodeNames(built); err != nil {
			return nil, fmt.Errorf("project %s: built stage bases: %w", p.Path, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// loadDetails fills the files, dependencies and warnings of the projects in
// index, reading the rows selected by where (with args).
func loadDetails(ctx context.Context, tx *sql.Tx, index map[int64]*scan.Project, where string, args ...any) error {
	if err := loadRefs(ctx, tx, index, where, args...); err != nil {
		return err
	}
	// at is where a row of a node of project id goes; nil for a node
	// the project no longer has.
	at := func(id int64, node string) (nodeFields, bool) {
		p := index[id]
		if p == nil {
			return nodeFields{}, false
		}
		return nodeOf(p, node)
	}
	rows, err := tx.QueryContext(ctx, `SELECT project_id, name, content, node
		FROM files`+where+` ORDER BY project_id, seq`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var f scan.File
		var node string
		if err := rows.Scan(&id, &f.Name, &f.Content, &node); err != nil {
			return err
		}
		if f.Content == nil {
			f.Content = []byte{} // the driver reads an empty BLOB as nil; the file exists
		}
		if n, ok := at(id, node); ok {
			*n.files = append(*n.files, f)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()

	rows, err = tx.QueryContext(ctx, `SELECT project_id, kind, line, ref, image, repository, tag, digest, upstream,
			node, upstream_node, via, seen_in
		FROM dependencies`+where+` ORDER BY project_id, seq`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var d deps.Dependency
		var node string
		if err := rows.Scan(&id, &d.Kind, &d.Line, &d.Ref, &d.Image, &d.Repository, &d.Tag, &d.Digest, &d.Project,
			&node, &d.Node, &d.Via, &d.SeenIn); err != nil {
			return err
		}
		d.Pinned = d.Digest != "" && d.Kind != deps.KindGitLabDeps // as the analysis marks it
		if n, ok := at(id, node); ok {
			*n.deps = append(*n.deps, d)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()

	rows, err = tx.QueryContext(ctx, `SELECT project_id, file, line, message, node
		FROM warnings`+where+` ORDER BY project_id, seq`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var w deps.Warning
		var node string
		if err := rows.Scan(&id, &w.File, &w.Line, &w.Message, &node); err != nil {
			return err
		}
		if n, ok := at(id, node); ok {
			*n.warnings = append(*n.warnings, w)
		}
	}
	return rows.Err()
}

// encodeNames stores a short list (file names, images) as a JSON array:
// one portable TEXT column instead of a table for a list read with its
// project. An empty list is stored as an empty string.
func encodeNames(names []string) (string, error) {
	if len(names) == 0 {
		return "", nil
	}
	b, err := json.Marshal(names)
	return string(b), err
}

func decodeNames(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(s), &names); err != nil {
		return nil, fmt.Errorf("decode %q: %w", s, err)
	}
	return names, nil
}
