package store

import (
	"context"
	"fmt"

	"gitlab.com/depsd/depsd/chain"
)

// ChainWithReason implements chain.Tx: the chain holding a reason equal to
// r (kind, root, detail, time), found through the chain_reasons_root index.
func (t chainTx) ChainWithReason(ctx context.Context, r chain.Reason) (int64, bool, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT chain_id FROM chain_reasons
		WHERE project = $1 AND kind = $2 AND detail = $3 AND at = $4 ORDER BY chain_id LIMIT 1`,
		r.Project, string(r.Kind), r.Detail, encodeTime(r.At))
	if err != nil {
		return 0, false, fmt.Errorf("look up the chain of %s at %s: %w", r.Project, r.Detail, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, false, rows.Err()
	}
	var id int64
	if err := rows.Scan(&id); err != nil {
		return 0, false, err
	}
	return id, true, rows.Err()
}
