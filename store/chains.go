package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// UpdateChains runs fn in one immediate write transaction over the chain
// tables (chain.Store): the engine loads the active chains, applies a
// change, and writes chains and outbox actions back before it commits.
// The active chains are read through this process's cache (chaincache.go).
func (s *Store) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	var cc *txCache
	var ra *readAhead
	var recorded *recordingAhead
	if len(chain.EventsRecordedFirst(ctx)) > 0 {
		// A webhook's answer waits for this transaction: it goes first
		// through the gate, as RecordEvents does, and the inbox lets it
		// in between events (UrgentWritersWaiting).
		ctx = withUrgentWrites(ctx)
	}
	if s.dialect.kind == KindPostgres {
		// The engine reads the active chains' versions first.
		ra = &readAhead{}
		if evs := chain.EventsRecordedFirst(ctx); len(evs) > 0 {
			// Then records these (the Recorder's quiet path). If they
			// cannot be encoded, RecordEvents says why.
			if a, err := newRecordingAhead(evs); err == nil {
				recorded, ra.then = a, a.statements()
				// A recording needs no write lock on PostgreSQL:
				// held by another session, the recording is kept
				// alone (chain.RecordedOnlyError).
				ra.tryLock = true
				// Nor this process's gate: a writer of its own
				// there may be waiting for another replica's
				// lock.
				ctx = withoutGateWait(ctx)
			}
		}
		ctx = withReadAhead(ctx, ra)
	}
	err := s.writeConn(ctx, func(conn *sql.Conn, tx *sql.Tx) error {
		t := chainTx{tx: cachedTx{Tx: tx, cache: s.stmts}}
		if s.dialect.kind == KindPostgres {
			t.tx.pipe = &pipeline{conn: conn}
		}
		cc = &txCache{cache: s.chains, fresh: map[int64]cachedChain{}, versions: ra, recorded: recorded}
		t.cc = cc
		if ra != nil && ra.busy {
			// Another session holds the write lock: the recording
			// went in with the BEGIN, and is committed alone.
			if err := t.tx.pipe.commit(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			return &chain.RecordedOnlyError{Duplicate: slices.Clone(recorded.rec.duplicate)}
		}
		if err := fn(t); err != nil {
			if t.tx.pipe != nil && t.tx.pipe.err != nil {
				return errors.Join(t.tx.pipe.err, err) // what failed first, first
			}
			return err
		}
		if err := t.flushMarks(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		return t.tx.pipe.commit(context.WithoutCancel(ctx))
	})
	if errors.Is(err, errGateBusy) {
		// Recorded on the pool instead, as the Recorder's group
		// commit does; the inbox applies it after that writer.
		evs := chain.EventsRecordedFirst(ctx)
		dups, err := s.RecordEvents(ctx, evs)
		if err != nil {
			return err
		}
		return &chain.RecordedOnlyError{Duplicate: dups}
	}
	if err == nil {
		s.chains.commit(cc.active, cc.fresh)
		if cc.versionsRead != nil {
			s.chains.keepVersions(generation(cc.versionsRead, "chains"), keptVersions(cc.versionsRead))
		}
	}
	return err
}

// ViewChains runs fn in a read-only snapshot of the chain tables.
func (s *Store) ViewChains(ctx context.Context, fn func(chain.Tx) error) error {
	return s.read(ctx, func(tx *sql.Tx) error { return fn(newChainTx(tx)) })
}

// chainTx implements chain.Tx on one SQL transaction.
type chainTx struct {
	tx cachedTx
	// cc is the chain cache of an UpdateChains transaction; nil in
	// ViewChains.
	cc *txCache
}

func newChainTx(tx *sql.Tx) chainTx { return chainTx{tx: cachedTx{Tx: tx}} }

// memberRow is a chain_members row as written: rowOf is the one place
// that lists a member's stored fields (TestMemberRoundTrip checks that it
// lists them all).
type memberRow struct {
	projectID           int64
	state, upstreams    string
	why                 string
	requeued, builds    int
	actionID            string
	noCache             int
	verified            string
	verifyDetail        string
	pipelineID          any
	pipelineURL         string
	triggered, finished any
	pinned, images      string
	mergeRequest        string
	mergeRequestIID     int64
	mergeSHA            string
}

func rowOf(m *chain.Member) (memberRow, error) {
	ups, err := encodeJSON(m.Upstreams)
	if err != nil {
		return memberRow{}, err
	}
	r := memberRow{projectID: m.ProjectID, state: string(m.State), upstreams: ups, why: m.Why, builds: m.Builds,
		actionID: m.ActionID, pipelineURL: m.PipelineURL, triggered: encodeTime(m.TriggeredAt), finished: encodeTime(m.FinishedAt)}
	if m.Requeued {
		r.requeued = 1
	}
	if m.NoCache {
		r.noCache = 1
	}
	r.verified, r.verifyDetail = string(m.Verified), m.VerifyDetail
	if m.PipelineID != 0 {
		r.pipelineID = m.PipelineID
	}
	if len(m.Pinned) > 0 {
		if r.pinned, err = encodeJSON(m.Pinned); err != nil {
			return memberRow{}, err
		}
	}
	if r.images, err = encodeImages(m.Images); err != nil {
		return memberRow{}, err
	}
	r.mergeRequest, r.mergeRequestIID, r.mergeSHA = m.MergeRequest, m.MergeRequestIID, m.MergeSHA
	return r, nil
}

const chainColumns = `id, mode, state, roots, skipped, merged_into, started_at, updated_at, ended_at, kind, validation`

// ActiveChains returns the running and blocked chains with their members.
func (t chainTx) ActiveChains(ctx context.Context) ([]*chain.Chain, error) {
	if t.cc != nil {
		t.cc.active = map[int64]bool{}
		return t.cachedActiveChains(ctx)
	}
	return t.queryChains(ctx, `SELECT `+chainColumns+` FROM chains WHERE state IN ($1, $2) ORDER BY id`,
		string(chain.Running), string(chain.Blocked))
}

// Chain returns one chain, or an error wrapping chain.ErrNotFound.
func (t chainTx) Chain(ctx context.Context, id int64) (*chain.Chain, error) {
	cs, err := t.queryChains(ctx, `SELECT `+chainColumns+` FROM chains WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, chain.ErrNotFound
	}
	return cs[0], nil
}

// Chains returns the chains matching f, newest first.
func (t chainTx) Chains(ctx context.Context, f chain.Filter) ([]*chain.Chain, error) {
	var where []string
	var args []any
	kind := f.Kind
	if kind == "" {
		kind = chain.KindRelease
	}
	if kind == chain.KindRelease {
		args = append(args, string(chain.KindValidation))
		where = append(where, fmt.Sprintf("kind <> $%d", len(args)))
	} else {
		args = append(args, string(kind))
		where = append(where, fmt.Sprintf("kind = $%d", len(args)))
	}
	if f.State != "" {
		args = append(args, string(f.State))
		where = append(where, fmt.Sprintf("state = $%d", len(args)))
	}
	if f.Project != "" {
		args = append(args, f.Project)
		where = append(where, fmt.Sprintf("id IN (SELECT chain_id FROM chain_members WHERE project = $%d)", len(args)))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + chainColumns + ` FROM chains`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args))
	return t.queryChains(ctx, q, args...)
}

// queryChains reads chains and then their reasons and members.
func (t chainTx) queryChains(ctx context.Context, q string, args ...any) ([]*chain.Chain, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read chains: %w", err)
	}
	var out []*chain.Chain
	byID := map[int64]*chain.Chain{}
	for rows.Next() {
		var c chain.Chain
		var mode, state, roots, skipped, kind, validation string
		var merged sql.NullInt64
		var started, updated, ended sql.NullString
		if err := rows.Scan(&c.ID, &mode, &state, &roots, &skipped, &merged, &started, &updated, &ended, &kind, &validation); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read chains: %w", err)
		}
		c.Mode, c.State, c.MergedInto = chain.Mode(mode), chain.State(state), merged.Int64
		c.Kind = chain.ChainKind(kind) // "" is a release chain
		if validation != "" {
			c.Validation = new(chain.Validation)
			if err := json.Unmarshal([]byte(validation), c.Validation); err != nil {
				rows.Close()
				return nil, fmt.Errorf("chain %d validation: %w", c.ID, err)
			}
		}
		if err := decodeJSON(roots, &c.Roots); err != nil {
			rows.Close()
			return nil, fmt.Errorf("chain %d roots: %w", c.ID, err)
		}
		if err := decodeJSON(skipped, &c.Skipped); err != nil {
			rows.Close()
			return nil, fmt.Errorf("chain %d skipped: %w", c.ID, err)
		}
		for _, f := range []struct {
			dst *time.Time
			col sql.NullString
		}{{&c.StartedAt, started}, {&c.UpdatedAt, updated}, {&c.EndedAt, ended}} {
			if err := decodeTimeInto(f.dst, f.col); err != nil {
				rows.Close()
				return nil, fmt.Errorf("chain %d: %w", c.ID, err)
			}
		}
		out = append(out, &c)
		byID[c.ID] = &c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read chains: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	ids := make([]any, 0, len(out))
	ph := make([]string, 0, len(out))
	for i, c := range out {
		ids = append(ids, c.ID)
		ph = append(ph, fmt.Sprintf("$%d", i+1))
	}
	in := "(" + strings.Join(ph, ", ") + ")"
	if err := t.loadReasons(ctx, byID, in, ids); err != nil {
		return nil, err
	}
	if err := t.loadMembers(ctx, byID, in, ids); err != nil {
		return nil, err
	}
	return out, nil
}

func (t chainTx) loadReasons(ctx context.Context, byID map[int64]*chain.Chain, in string, ids []any) error {
	rows, err := t.tx.QueryContext(ctx, `SELECT chain_id, kind, project, detail, pipeline_id, at
		FROM chain_reasons WHERE chain_id IN `+in+` ORDER BY chain_id, seq`, ids...)
	if err != nil {
		return fmt.Errorf("read chain reasons: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r chain.Reason
		var kind string
		var pipeline sql.NullInt64
		var at sql.NullString
		if err := rows.Scan(&id, &kind, &r.Project, &r.Detail, &pipeline, &at); err != nil {
			return fmt.Errorf("read chain reasons: %w", err)
		}
		r.Kind, r.PipelineID = chain.ReasonKind(kind), pipeline.Int64
		if r.At, err = decodeTime(at); err != nil {
			return fmt.Errorf("chain %d reason: %w", id, err)
		}
		if c := byID[id]; c != nil {
			c.Reasons = append(c.Reasons, r)
		}
	}
	return rows.Err()
}

func (t chainTx) loadMembers(ctx context.Context, byID map[int64]*chain.Chain, in string, ids []any) error {
	rows, err := t.tx.QueryContext(ctx, `SELECT chain_id, project, project_id, state, upstreams, why, requeued,
		builds, action_id, pipeline_id, pipeline_url, triggered_at, finished_at, no_cache, verified, verify_detail,
		pinned, images, merge_request, merge_request_iid, merge_sha
		FROM chain_members WHERE chain_id IN `+in+` ORDER BY chain_id, project`, ids...)
	if err != nil {
		return fmt.Errorf("read chain members: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var m chain.Member
		var state, ups string
		var requeued, noCache int
		var verified, pinned, images string
		var pipeline sql.NullInt64
		var triggered, finished sql.NullString
		if err := rows.Scan(&id, &m.Project, &m.ProjectID, &state, &ups, &m.Why, &requeued, &m.Builds,
			&m.ActionID, &pipeline, &m.PipelineURL, &triggered, &finished, &noCache, &verified, &m.VerifyDetail,
			&pinned, &images, &m.MergeRequest, &m.MergeRequestIID, &m.MergeSHA); err != nil {
			return fmt.Errorf("read chain members: %w", err)
		}
		if pinned != "" {
			if err := decodeJSON(pinned, &m.Pinned); err != nil {
				return fmt.Errorf("chain %d member %s: %w", id, m.Project, err)
			}
		}
		if m.Images, err = decodeImages(images); err != nil {
			return fmt.Errorf("chain %d member %s: %w", id, m.Project, err)
		}
		m.State, m.Requeued, m.PipelineID = chain.MemberState(state), requeued != 0, pipeline.Int64
		m.NoCache, m.Verified = noCache != 0, chain.ImageState(verified)
		if err := decodeJSON(ups, &m.Upstreams); err != nil {
			return fmt.Errorf("chain %d member %s: %w", id, m.Project, err)
		}
		if m.TriggeredAt, err = decodeTime(triggered); err != nil {
			return fmt.Errorf("chain %d member %s: %w", id, m.Project, err)
		}
		if m.FinishedAt, err = decodeTime(finished); err != nil {
			return fmt.Errorf("chain %d member %s: %w", id, m.Project, err)
		}
		if c := byID[id]; c != nil {
			c.Members = append(c.Members, &m) // ORDER BY project keeps them sorted
		}
	}
	return rows.Err()
}

// NewChainID returns an id above every chain's, and above those it
// returned before in this transaction. The transaction holds the write
// lock, so concurrent engines cannot take the same id. In UpdateChains the
// first id came with the active chains (cachedActiveChains).
func (t chainTx) NewChainID(ctx context.Context) (int64, error) {
	if t.cc == nil || t.cc.nextID == 0 {
		var id int64
		if err := t.tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM chains`).Scan(&id); err != nil {
			return 0, fmt.Errorf("new chain id: %w", err)
		}
		if t.cc == nil {
			return id, nil
		}
		t.cc.learnNextID(id)
	}
	id := t.cc.nextID
	t.cc.nextID++
	return id, nil
}

// SaveChain writes the chain row and replaces its reasons and members.
func (t chainTx) SaveChain(ctx context.Context, c *chain.Chain) error {
	roots, err := encodeJSON(c.Roots)
	if err != nil {
		return err
	}
	skipped, err := encodeJSON(c.Skipped)
	if err != nil {
		return err
	}
	var merged any
	if c.MergedInto != 0 {
		merged = c.MergedInto
	}
	kind, validation, err := encodeKind(c)
	if err != nil {
		return err
	}
	row := []any{c.ID, string(c.Mode), string(c.State), roots, skipped, merged,
		encodeTime(c.StartedAt), encodeTime(c.UpdatedAt), encodeTime(c.EndedAt), kind, validation} // chainColumns
	// version counts the saves, for the caches of every process
	// (chaincache.go).
	var version int64
	if e, known := t.cc.lookup(c); known {
		// Stored at e.version, and the write lock keeps it so: no need to
		// read the new version back, so the update can wait in the
		// pipeline with the rest of the save.
		version = e.version + 1
		err = t.tx.execLater(ctx, `UPDATE chains SET mode = $2, state = $3, roots = $4, skipped = $5, merged_into = $6,
			started_at = $7, updated_at = $8, ended_at = $9, kind = $10, validation = $11, version = $12 WHERE id = $1`,
			append(row, version)...)
	} else if t.cc.unstored(c) {
		// A chain created in this transaction (NewChainID), saved for
		// the first time.
		version = 1
		err = t.tx.execLater(ctx, `INSERT INTO chains (`+chainColumns+`, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1)`, row...)
	} else {
		// Not known stored: written whatever the row holds, and its
		// version read back.
		err = t.tx.QueryRowContext(ctx, `INSERT INTO chains (`+chainColumns+`, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1)
			ON CONFLICT (id) DO UPDATE SET mode = excluded.mode, state = excluded.state, roots = excluded.roots,
				skipped = excluded.skipped, merged_into = excluded.merged_into, started_at = excluded.started_at,
				updated_at = excluded.updated_at, ended_at = excluded.ended_at, kind = excluded.kind,
				validation = excluded.validation, version = chains.version + 1
			RETURNING version`, row...).Scan(&version)
	}
	if err != nil {
		return fmt.Errorf("write chain %d: %w", c.ID, err)
	}
	if err := t.chainsChanged(ctx); err != nil {
		return fmt.Errorf("write chain %d: %w", c.ID, err)
	}
	// Version 1: the row was just inserted, so the chain has no reasons
	// or members stored yet to replace.
	fresh := version == 1
	if err := t.saveReasons(ctx, c, fresh); err != nil {
		return err
	}
	if err := t.saveMembers(ctx, c, fresh); err != nil {
		return err
	}
	if t.cc != nil {
		// The chain is the transaction's own from here and the cache's
		// once it commits (chaincache.go): the engine changes a chain only
		// through its transaction, and saves what it changed.
		t.cc.fresh[c.ID] = stored(c, version)
	}
	return nil
}

// chainsChanged moves the chains generation on, once a transaction: the
// active chains' versions every process keeps (chaincache.go) are read
// again.
func (t chainTx) chainsChanged(ctx context.Context) error {
	if t.cc != nil {
		if t.cc.chainsWritten {
			return nil
		}
		t.cc.chainsWritten = true
	}
	return t.tx.execLater(ctx, `UPDATE generations SET n = n + 1 WHERE name = 'chains'`)
}

// saveReasons writes the reasons of c. A chain gains reasons (merges, a
// root added) far less often than it is saved: when this transaction knows
// the reasons stored (the chain came through the cache, chaincache.go),
// only those added since are written, and none if none were. Otherwise they
// are replaced (fresh: none are stored yet).
func (t chainTx) saveReasons(ctx context.Context, c *chain.Chain, fresh bool) error {
	from := 0
	if !fresh {
		e, known := t.cc.lookup(c)
		if known && len(e.reasons) <= len(c.Reasons) && slices.EqualFunc(e.reasons, c.Reasons[:len(e.reasons)], sameReason) {
			from = len(e.reasons)
		} else if err := t.tx.execLater(ctx, `DELETE FROM chain_reasons WHERE chain_id = $1`, c.ID); err != nil {
			return fmt.Errorf("write chain %d: %w", c.ID, err)
		}
	}
	for i := from; i < len(c.Reasons); i++ {
		r := c.Reasons[i]
		var pipeline any
		if r.PipelineID != 0 {
			pipeline = r.PipelineID
		}
		err := t.tx.execLater(ctx, `INSERT INTO chain_reasons (chain_id, seq, kind, project, detail, pipeline_id, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.ID, i, string(r.Kind), r.Project, r.Detail, pipeline, encodeTime(r.At))
		if err != nil {
			return fmt.Errorf("write chain %d reason: %w", c.ID, err)
		}
	}
	return nil
}

// sameReason compares reasons as stored (times to the instant).
func sameReason(a, b chain.Reason) bool {
	return a.Kind == b.Kind && a.Project == b.Project && a.Detail == b.Detail && a.PipelineID == b.PipelineID &&
		a.At.Equal(b.At)
}

// saveMembers writes the members of c that changed since it was loaded or
// saved (chain.Chain.SaveSet): an event changes a few members of a chain
// that may have thousands. Without that knowledge every member is
// rewritten (fresh: the chain was just inserted and has none stored).
func (t chainTx) saveMembers(ctx context.Context, c *chain.Chain, fresh bool) error {
	members, all := c.SaveSet()
	if all {
		if !fresh {
			if err := t.tx.execLater(ctx, `DELETE FROM chain_members WHERE chain_id = $1`, c.ID); err != nil {
				return fmt.Errorf("write chain %d: %w", c.ID, err)
			}
		}
		members = c.Members
	}
	rows := make([][]any, 0, len(members))
	for _, m := range members {
		r, err := rowOf(m)
		if err != nil {
			return err
		}
		rows = append(rows, []any{c.ID, m.Project, r.projectID, r.state, r.upstreams, r.why, r.requeued,
			r.builds, r.actionID, r.pipelineID, r.pipelineURL, r.triggered, r.finished, r.noCache, r.verified, r.verifyDetail,
			r.pinned, r.images, r.mergeRequest, r.mergeRequestIID, r.mergeSHA})
	}
	// Several rows per statement (execRows), each text prepared once: by
	// the statement cache (SQLite) or by pgx per connection.
	if err := t.tx.execRows(ctx, upsertMemberHead, upsertMemberTail, 21, rows); err != nil {
		return fmt.Errorf("write chain %d members: %w", c.ID, err)
	}
	return nil
}

const (
	upsertMemberHead = `INSERT INTO chain_members (chain_id, project, project_id, state,
	upstreams, why, requeued, builds, action_id, pipeline_id, pipeline_url, triggered_at, finished_at,
	no_cache, verified, verify_detail, pinned, images, merge_request, merge_request_iid, merge_sha)
	VALUES `
	upsertMemberTail = `
	ON CONFLICT (chain_id, project) DO UPDATE SET project_id = excluded.project_id, state = excluded.state,
		upstreams = excluded.upstreams, why = excluded.why, requeued = excluded.requeued,
		builds = excluded.builds, action_id = excluded.action_id, pipeline_id = excluded.pipeline_id,
		pipeline_url = excluded.pipeline_url, triggered_at = excluded.triggered_at,
		finished_at = excluded.finished_at, no_cache = excluded.no_cache, verified = excluded.verified,
		verify_detail = excluded.verify_detail, pinned = excluded.pinned, images = excluded.images,
		merge_request = excluded.merge_request, merge_request_iid = excluded.merge_request_iid,
		merge_sha = excluded.merge_sha`
)

// Project returns a stored project's id, default branch and the refs of
// its other nodes.
//
// In UpdateChains, once ActiveChains read the projects' generation, it
// answers from this process's cache while that generation holds
// (chaincache.go).
func (t chainTx) Project(ctx context.Context, path string) (chain.Project, bool, error) {
	var gen int64
	if t.cc != nil {
		gen = t.cc.projectsGen
		if l, ok := t.cc.cache.project(gen, path); ok {
			return l.p, l.ok, nil
		}
	}
	p, found := chain.Project{Path: path}, true
	var ident, file string
	err := t.tx.QueryRowContext(ctx, `SELECT id, default_branch, pipeline_ident, visibility, file, registry_prefix
		FROM projects WHERE path = $1`, path).
		Scan(&p.ID, &p.DefaultBranch, &ident, &p.Visibility, &file, &p.RegistryPrefix)
	p.Ident = chain.PipelineIdent(ident)
	if errIsNotFound(err) {
		p, found, err = chain.Project{}, false, nil
	}
	if found && err == nil {
		p.Refs, p.Files, err = projectRefs(ctx, t.tx, p.ID)
		if file != "" {
			if p.Files == nil {
				p.Files = map[string]string{}
			}
			p.Files[path] = file
		}
	}
	if err != nil {
		return chain.Project{}, false, fmt.Errorf("read project %s: %w", path, err)
	}
	if t.cc != nil {
		t.cc.cache.keepProject(gen, path, projectLookup{p, found})
	}
	return p, found, nil
}

// SetPipelineIdent stores how the project's pipelines are identified, and
// moves the projects' generation on so that every process's cache of
// projects (chaincache.go) reads it again.
func (t chainTx) SetPipelineIdent(ctx context.Context, projectID int64, ident chain.PipelineIdent) error {
	if _, err := t.tx.ExecContext(ctx, `UPDATE projects SET pipeline_ident = $1 WHERE id = $2`, string(ident), projectID); err != nil {
		return fmt.Errorf("set pipeline ident of project %d: %w", projectID, err)
	}
	if _, err := t.tx.ExecContext(ctx, `UPDATE generations SET n = n + 1 WHERE name = 'projects'`); err != nil {
		return fmt.Errorf("set pipeline ident of project %d: %w", projectID, err)
	}
	return nil
}

// encodeJSON stores nil slices as [] so the column is never "null".
func encodeJSON[T any](v []T) (string, error) {
	if v == nil {
		return "[]", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	return string(b), nil
}

func decodeJSON[T any](s string, v *[]T) error {
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("decode %q: %w", s, err)
	}
	if len(*v) == 0 {
		*v = nil
	}
	return nil
}

// decodeTimeInto decodes a time column into dst.
func decodeTimeInto(dst *time.Time, col sql.NullString) error {
	t, err := decodeTime(col)
	*dst = t
	return err
}
