package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"gitlab.com/depsd/depsd/scan"
)

// checkScan rejects a scan result that would break the store's invariants,
// before anything is written.
func checkScan(projects []scan.Project) error {
	ids := make(map[int64]string, len(projects))
	paths := make(map[string]int64, len(projects))
	for _, p := range projects {
		if p.ID <= 0 {
			return fmt.Errorf("project %q has no GitLab id", p.Path)
		}
		if p.Path == "" {
			return fmt.Errorf("project %d has no path", p.ID)
		}
		if other, dup := ids[p.ID]; dup {
			return fmt.Errorf("project id %d appears twice (%s, %s)", p.ID, other, p.Path)
		}
		if other, dup := paths[p.Path]; dup {
			return fmt.Errorf("project path %s appears twice (ids %d, %d)", p.Path, other, p.ID)
		}
		ids[p.ID], paths[p.Path] = p.Path, p.ID
	}
	return nil
}

// ApplyScan makes the stored projects exactly those of a scan, in one
// transaction, and records meta as the latest scan:
//   - every project given is upserted by GitLab id, so a renamed or
//     transferred project keeps its row and takes its new path;
//   - its files, dependencies and warnings are replaced by those given;
//   - projects not given (removed, archived, out of scope) are deleted with
//     their dependencies.
//
// An incremental scan therefore passes every project in scope, copying the
// stored files of those it did not refetch. Rows that did
// not change are not rewritten, so the periodic rescan of a quiet instance
// writes little more than its scan record. Readers see the old state or the
// new one, never a mix.
//
// The stored projects are read before the write lock is taken, and again
// inside only if a scan or another writer changed them meanwhile (their
// generation moved): reading every project and its files holds the lock,
// and every webhook's answer queued behind it, for milliseconds.
func (s *Store) ApplyScan(ctx context.Context, projects []scan.Project, meta scan.Meta) error {
	if err := checkScan(projects); err != nil {
		return fmt.Errorf("apply scan: %w", err)
	}
	var early *storedState
	if stored, generation, err := s.ProjectsAt(ctx); err == nil {
		early = storedStateOf(stored, generation)
	} // else read under the lock
	return s.applyScan(ctx, projects, meta, early)
}

// ProjectsAt is Projects with the generation they were read at, for
// ApplyScanOver.
func (s *Store) ProjectsAt(ctx context.Context) (projects []scan.Project, generation int64, err error) {
	err = s.read(ctx, func(tx *sql.Tx) error {
		// The generation first: the projects read after it are at least
		// as new, so an unchanged generation vouches for them.
		if generation, err = projectsGeneration(ctx, tx); err != nil {
			return err
		}
		var kept bool
		if projects, kept = s.projects.at(generation); kept {
			return nil
		}
		// Not kept as read: a first scan of a large instance lets go of
		// what it read before analysing (scan.Run), which a copy kept
		// here would hold.
		projects, err = readProjects(ctx, tx)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read projects: %w", err)
	}
	return projects, generation, nil
}

// ApplyScanOver is ApplyScan for a scan that kept the stored projects it
// read (ProjectsAt), unchanged: they stand for ApplyScan's read before
// the write, which saves reading every project again.
func (s *Store) ApplyScanOver(ctx context.Context, projects []scan.Project, meta scan.Meta, stored []scan.Project, generation int64) error {
	if err := checkScan(projects); err != nil {
		return fmt.Errorf("apply scan: %w", err)
	}
	return s.applyScan(ctx, projects, meta, storedStateOf(stored, generation))
}

// storedState is the stored projects by id, read at a generation of them.
type storedState struct {
	byID       map[int64]*scan.Project
	generation int64
}

func storedStateOf(stored []scan.Project, generation int64) *storedState {
	byID := make(map[int64]*scan.Project, len(stored))
	for i := range stored {
		byID[stored[i].ID] = &stored[i]
	}
	return &storedState{byID: byID, generation: generation}
}

// applyScan is ApplyScan with the stored projects as read early, used if
// their generation did not move since.
func (s *Store) applyScan(ctx context.Context, projects []scan.Project, meta scan.Meta, early *storedState) error {
	// What the stored projects are once this commits (projectsCache);
	// nil: not known.
	var after []scan.Project
	var afterGen int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		after = nil
		var latest sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT MAX(started_at) FROM scans`).Scan(&latest); err != nil {
			return fmt.Errorf("read last scan: %w", err)
		}
		if last, err := decodeTime(latest); err != nil {
			return fmt.Errorf("read last scan: %w", err)
		} else if meta.OnlyIfLatest && !last.Equal(meta.Replaces) {
			return scan.ErrConflict
		}
		gen, err := projectsGeneration(ctx, tx)
		if err != nil {
			return err
		}
		if early == nil || early.generation != gen {
			stored, err := readProjects(ctx, tx)
			if err != nil {
				return fmt.Errorf("read stored projects: %w", err)
			}
			early = storedStateOf(stored, gen)
		}
		old := early.byID
		// Every process's cache of projects (chaincache.go) is void once
		// this commits.
		if _, err := tx.ExecContext(ctx, `UPDATE generations SET n = n + 1 WHERE name = 'projects'`); err != nil {
			return fmt.Errorf("count the scan: %w", err)
		}
		if err := removeAndPark(ctx, tx, old, projects); err != nil {
			return err
		}
		written, err := saveProjects(ctx, tx, old, projects)
		if err != nil {
			return err
		}
		if after, err = afterWrite(ctx, tx, old, projects, written); err != nil {
			return fmt.Errorf("read back the projects written: %w", err)
		}
		afterGen = gen + 1
		return insertScan(ctx, tx, meta)
	})
	if err != nil {
		// Not committed (or not known to be): what after holds may not be
		// stored, at a generation another writer may yet reach.
		s.projects.keep(0, nil)
		return fmt.Errorf("apply scan: %w", err)
	}
	s.projects.keep(afterGen, after)
	return nil
}

// projectsGeneration reads the counter every change of the projects
// bumps (ApplyScan, SetPipelineIdent).
func projectsGeneration(ctx context.Context, tx *sql.Tx) (int64, error) {
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT n FROM generations WHERE name = 'projects'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the projects' generation: %w", err)
	}
	return n, nil
}

// removeAndPark deletes the projects that are gone, with their dependencies
// (ON DELETE CASCADE), and moves renamed projects out of the way. Paths are
// unique and renames can swap or chain (a → b while b → c), so a renamed
// row first takes a path no project can have; saveProjects then gives it its
// new one.
func removeAndPark(ctx context.Context, tx *sql.Tx, old map[int64]*scan.Project, projects []scan.Project) error {
	keep := make(map[int64]bool, len(projects))
	for _, p := range projects {
		keep[p.ID] = true
	}
	for id, p := range old {
		if keep[id] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM projects WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete project %s: %w", p.Path, err)
		}
	}
	for _, p := range projects {
		if o := old[p.ID]; o != nil && o.Path != p.Path {
			if _, err := tx.ExecContext(ctx, `UPDATE projects SET path = $1 WHERE id = $2`,
				fmt.Sprintf(" renaming %d", p.ID), p.ID); err != nil { // GitLab paths have no spaces
				return fmt.Errorf("rename project %s to %s: %w", o.Path, p.Path, err)
			}
		}
	}
	return nil
}

// saveProjects upserts the projects whose row changed and replaces the
// dependencies and warnings that changed. old holds the stored state. It
// returns the ids of the projects it wrote anything of.
func saveProjects(ctx context.Context, tx *sql.Tx, old map[int64]*scan.Project, projects []scan.Project) (written []int64, _ error) {
	upsert, err := tx.PrepareContext(ctx, `INSERT INTO projects (`+projectColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (id) DO UPDATE SET
			path = excluded.path,
			default_branch = excluded.default_branch,
			registry_prefix = excluded.registry_prefix,
			web_url = excluded.web_url,
			head_commit = excluded.head_commit,
			last_activity = excluded.last_activity,
			head_checked_at = excluded.head_checked_at,
			searched_files = excluded.searched_files,
			file = excluded.file,
			scanned_at = excluded.scanned_at,
			pipeline_ident = CASE WHEN excluded.pipeline_ident = '' THEN projects.pipeline_ident
				ELSE excluded.pipeline_ident END,
			built = excluded.built,
			refs_rule = excluded.refs_rule,
			visibility = excluded.visibility`)
	if err != nil {
		return nil, err
	}
	defer upsert.Close()
	for _, p := range projects {
		o := old[p.ID]
		changed := false
		if o == nil || !sameRow(o, &p) {
			changed = true
			searched, err := encodeNames(p.SearchedFiles)
			if err != nil {
				return nil, fmt.Errorf("save project %s: %w", p.Path, err)
			}
			built, err := encodeNames(p.Built)
			if err != nil {
				return nil, fmt.Errorf("save project %s: %w", p.Path, err)
			}
			if _, err := upsert.ExecContext(ctx, p.ID, p.Path, p.DefaultBranch, p.RegistryPrefix, p.WebURL,
				p.HeadCommit, encodeTime(p.LastActivity), encodeTime(p.HeadCheckedAt), searched, p.File,
				encodeTime(p.ScannedAt), p.PipelineIdent, built, p.RefsRule, p.Visibility); err != nil {
				return nil, fmt.Errorf("save project %s: %w", p.Path, err)
			}
		}
		if o == nil || !sameRefRows(o.Refs, p.Refs) {
			changed = true
			if err := replaceRefs(ctx, tx, p, o != nil); err != nil {
				return nil, fmt.Errorf("save refs of %s: %w", p.Path, err)
			}
		}
		if o == nil || !slices.EqualFunc(fileRows(o), fileRows(&p), func(a, b fileRow) bool { return a.node == b.node && sameFile(a.f, b.f) }) {
			changed = true
			if err := replaceFiles(ctx, tx, p, o != nil); err != nil {
				return nil, fmt.Errorf("save files of %s: %w", p.Path, err)
			}
		}
		if o == nil || !slices.Equal(dependencyRows(o), dependencyRows(&p)) {
			changed = true
			if err := replaceDependencies(ctx, tx, p, o != nil); err != nil {
				return nil, fmt.Errorf("save dependencies of %s: %w", p.Path, err)
			}
		}
		if o == nil || !slices.Equal(warningRows(o), warningRows(&p)) {
			changed = true
			if err := replaceWarnings(ctx, tx, p, o != nil); err != nil {
				return nil, fmt.Errorf("save warnings of %s: %w", p.Path, err)
			}
		}
		if changed {
			written = append(written, p.ID)
		}
	}
	return written, nil
}

// sameRow reports whether the projects row of a would be stored unchanged
// as b. Times compare as instants, as they are stored.
func sameRow(a, b *scan.Project) bool {
	return a.Path == b.Path && a.DefaultBranch == b.DefaultBranch && a.RegistryPrefix == b.RegistryPrefix &&
		a.WebURL == b.WebURL && a.HeadCommit == b.HeadCommit && a.File == b.File &&
		a.LastActivity.Equal(b.LastActivity) && a.HeadCheckedAt.Equal(b.HeadCheckedAt) &&
		a.ScannedAt.Equal(b.ScannedAt) && slices.Equal(a.SearchedFiles, b.SearchedFiles) && slices.Equal(a.Built, b.Built) &&
		(b.PipelineIdent == "" || a.PipelineIdent == b.PipelineIdent) && a.RefsRule == b.RefsRule &&
		a.Visibility == b.Visibility
}

func sameFile(a, b scan.File) bool { return a.Name == b.Name && bytes.Equal(a.Content, b.Content) }

func replaceFiles(ctx context.Context, tx *sql.Tx, p scan.Project, existed bool) error {
	if existed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE project_id = $1`, p.ID); err != nil {
			return err
		}
	}
	for i, r := range fileRows(&p) {
		content := r.f.Content
		if content == nil {
			content = []byte{} // the column is NOT NULL; an empty file is still a file
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO files (project_id, seq, name, content, node) VALUES ($1, $2, $3, $4, $5)`,
			p.ID, i, r.f.Name, content, r.node); err != nil {
			return err
		}
	}
	return nil
}

// replaceDependencies writes p's dependencies one row per statement. The
// SQLite driver prepares every statement it executes anew and binds $N
// parameters in time quadratic in their number, so multi-row INSERTs
// measured no faster (2,000 projects) and were more code.
func replaceDependencies(ctx context.Context, tx *sql.Tx, p scan.Project, existed bool) error {
	if existed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM dependencies WHERE project_id = $1`, p.ID); err != nil {
			return err
		}
	}
	for i, r := range dependencyRows(&p) {
		d := r.d
		if _, err := tx.ExecContext(ctx, `INSERT INTO dependencies
			(project_id, seq, kind, line, ref, image, repository, tag, digest, upstream, node, upstream_node, via, seen_in)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			p.ID, i, string(d.Kind), d.Line, d.Ref, d.Image, d.Repository, d.Tag, d.Digest, d.Project, r.node, d.Node, string(d.Via), d.SeenIn); err != nil {
			return err
		}
	}
	return nil
}

func replaceWarnings(ctx context.Context, tx *sql.Tx, p scan.Project, existed bool) error {
	if existed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM warnings WHERE project_id = $1`, p.ID); err != nil {
			return err
		}
	}
	for i, r := range warningRows(&p) {
		w := r.w
		if _, err := tx.ExecContext(ctx, `INSERT INTO warnings (project_id, seq, file, line, message, node)
			VALUES ($1, $2, $3, $4, $5, $6)`, p.ID, i, w.File, w.Line, w.Message, r.node); err != nil {
			return err
		}
	}
	return nil
}
