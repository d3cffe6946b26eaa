package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

const actionColumns = `id, chain_id, project, project_id, ref, upstreams, state, attempts, next_attempt_at,
	lease_until, last_error, pipeline_id, pipeline_url, created_at, sent_at, claimed_by, claimed_at, no_cache,
	kind, payload`

// AddAction writes a new action to the outbox (through the pipeline on
// PostgreSQL: a success may queue hundreds, sent in one round trip).
func (t chainTx) AddAction(ctx context.Context, a chain.Action) error {
	err := t.tx.execLater(ctx, `INSERT INTO outbox (`+actionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`, actionArgs(a)...)
	if err != nil {
		return fmt.Errorf("write action %s: %w", a.ID, err)
	}
	return nil
}

// UpdateAction replaces the stored action with the same id.
func (t chainTx) UpdateAction(ctx context.Context, a chain.Action) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE outbox SET chain_id = $2, project = $3, project_id = $4, ref = $5,
		upstreams = $6, state = $7, attempts = $8, next_attempt_at = $9, lease_until = $10, last_error = $11,
		pipeline_id = $12, pipeline_url = $13, created_at = $14, sent_at = $15, claimed_by = $16,
		claimed_at = $17, no_cache = $18, kind = $19, payload = $20 WHERE id = $1`, actionArgs(a)...)
	if err != nil {
		return fmt.Errorf("update action %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("update action %s: %w", a.ID, chain.ErrNotFound)
	}
	return nil
}

func actionArgs(a chain.Action) []any {
	var pipeline any
	if a.PipelineID != 0 {
		pipeline = a.PipelineID
	}
	noCache := 0
	if a.NoCache {
		noCache = 1
	}
	return []any{a.ID, a.ChainID, a.Project, a.ProjectID, a.Ref, strings.Join(a.Upstreams, ","), string(a.State),
		a.Attempts, encodeTime(a.NextAttemptAt), encodeTime(a.LeaseUntil), a.LastError, pipeline, a.PipelineURL,
		encodeTime(a.CreatedAt), encodeTime(a.SentAt), a.ClaimedBy, encodeTime(a.ClaimedAt), noCache,
		string(a.Kind), encodePayload(a)}
}

// Action returns the action with this id.
func (t chainTx) Action(ctx context.Context, id string) (chain.Action, bool, error) {
	if t.cc != nil {
		if a, has, ok := t.cc.looked.takeAction(id); ok {
			return a, has, nil
		}
	}
	return t.queryAction(ctx, actionByIDQuery, []any{id})
}

// actionByIDQuery is Action's statement.
var actionByIDQuery = `SELECT ` + actionColumns + ` FROM outbox WHERE id = $1`

// pipelineSeenQuery is PipelineSeen's statement, built once.
var pipelineSeenQuery = `SELECT ` + prefixed("o.", actionColumns) + `,
		EXISTS (SELECT 1 FROM chain_members WHERE pipeline_id = $1 AND state IN ($2, $3, $4)),
		EXISTS (SELECT 1 FROM chain_reasons WHERE pipeline_id = $1)
	FROM (SELECT 1 AS one) AS one LEFT JOIN outbox o ON o.id = (SELECT id FROM outbox WHERE pipeline_id = $1
		AND created_at = (SELECT MIN(created_at) FROM outbox WHERE pipeline_id = $1) LIMIT 1)`

// pipelineSeenArgs are pipelineSeenQuery's arguments: a member counted
// its success with the pipeline when it is Success, Verifying or Stale
// with it.
func pipelineSeenArgs(pipelineID int64) []any {
	return []any{pipelineID, string(chain.Success), string(chain.Verifying), string(chain.Stale)}
}

// PipelineSeen implements chain.Tx: one query, one round trip on
// PostgreSQL, for the three look-ups a pipeline event of the inbox makes.
// The action is LEFT JOINed, so the row is there without one.
func (t chainTx) PipelineSeen(ctx context.Context, pipelineID int64) (chain.PipelineSeen, error) {
	// The first action by created_at, without ORDER BY: SQLite sorts
	// those in a temporary b-tree, which its pure-Go build allocates and
	// frees with mmap and munmap, on every pipeline event of the inbox.
	if t.cc != nil {
		if seen, ok := t.cc.looked.takePipeline(pipelineID); ok {
			return seen, nil
		}
	}
	var seen chain.PipelineSeen
	var err error
	seen.Action, seen.HasAction, err = t.queryAction(ctx, pipelineSeenQuery,
		pipelineSeenArgs(pipelineID), &seen.Counted, &seen.Started)
	if err != nil {
		return chain.PipelineSeen{}, fmt.Errorf("look up pipeline %d: %w", pipelineID, err)
	}
	return seen, nil
}

// DueAction returns the pending action due first whose lease, if any, ran
// out; a validation's build only when no other action is due (lower
// priority, chain/premerge.go).
func (t chainTx) DueAction(ctx context.Context, now time.Time) (chain.Action, bool, error) {
	n := encodeTime(now)
	return t.queryAction(ctx, `SELECT `+actionColumns+` FROM outbox
		WHERE state = $1 AND next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2
			OR (claimed_by <> '' AND NOT EXISTS (SELECT 1 FROM leases l
				WHERE l.name = 'alive:' || outbox.claimed_by AND l.expires_at > $2)))
		ORDER BY CASE WHEN kind = $3 THEN 1 ELSE 0 END, next_attempt_at, created_at, id LIMIT 1`,
		[]any{string(chain.ActionPending), n, string(chain.ActionValidate)})
}

// NextDue returns when the earliest pending action falls due.
func (t chainTx) NextDue(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullString
	err := t.tx.QueryRowContext(ctx, `SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_attempt_at
		THEN lease_until ELSE next_attempt_at END) FROM outbox WHERE state = $1`, string(chain.ActionPending)).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read next due action: %w", err)
	}
	at, err := decodeTime(next)
	return at, next.Valid, err
}

// CountActions counts the actions in a state.
func (t chainTx) CountActions(ctx context.Context, state chain.ActionState) (int, error) {
	var n int
	if err := t.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE state = $1`, string(state)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count actions: %w", err)
	}
	return n, nil
}

func (t chainTx) queryAction(ctx context.Context, q string, args []any, extra ...any) (chain.Action, bool, error) {
	return scanAction(func(dest ...any) error { return t.tx.QueryRowContext(ctx, q, args...).Scan(dest...) }, extra...)
}

// scanAction reads a row of actionColumns, then extra, through scan.
func scanAction(scan func(dest ...any) error, extra ...any) (chain.Action, bool, error) {
	var a chain.Action
	// Every column may be NULL: PipelineSeen's row has no action when
	// none matched.
	var id, project, ref, ups, state, lastError, url, claimedBy, kind, payload sql.NullString
	var chainID, projectID, attempts, pipeline, noCache sql.NullInt64
	var next, lease, created, sent, claimedAt sql.NullString
	dest := append([]any{&id, &chainID, &project, &projectID, &ref, &ups, &state, &attempts, &next, &lease,
		&lastError, &pipeline, &url, &created, &sent, &claimedBy, &claimedAt, &noCache, &kind, &payload}, extra...)
	err := scan(dest...)
	if errIsNotFound(err) {
		return chain.Action{}, false, nil
	}
	if err != nil {
		return chain.Action{}, false, fmt.Errorf("read action: %w", err)
	}
	if !id.Valid {
		return chain.Action{}, false, nil
	}
	a.ID, a.ChainID, a.Project, a.ProjectID, a.Ref = id.String, chainID.Int64, project.String, projectID.Int64, ref.String
	a.State, a.Attempts, a.LastError, a.PipelineID = chain.ActionState(state.String), int(attempts.Int64), lastError.String, pipeline.Int64
	a.PipelineURL, a.ClaimedBy, a.NoCache = url.String, claimedBy.String, noCache.Int64 != 0
	a.Kind = chain.ActionKind(kind.String)
	if err := decodePayload(&a, payload.String); err != nil {
		return chain.Action{}, false, fmt.Errorf("action %s: %w", a.ID, err)
	}
	if ups.String != "" {
		a.Upstreams = strings.Split(ups.String, ",")
	}
	for _, f := range []struct {
		dst *time.Time
		col sql.NullString
	}{{&a.NextAttemptAt, next}, {&a.LeaseUntil, lease}, {&a.CreatedAt, created}, {&a.SentAt, sent}, {&a.ClaimedAt, claimedAt}} {
		if err := decodeTimeInto(f.dst, f.col); err != nil {
			return chain.Action{}, false, fmt.Errorf("action %s: %w", a.ID, err)
		}
	}
	return a, true, nil
}

// prefixed qualifies each of a comma-separated column list with prefix
// ("o." for a join).
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
