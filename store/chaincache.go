package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gitlab.com/depsd/depsd/chain"
)

// chainCache keeps this process's copy of the active chains between
// UpdateChains transactions, so that applying an event does not read every
// member of every active chain again: a chain of 2,000 members would cost
// ~100× one of 5. Every SaveChain increments the chain's version in the
// store, under the write lock; a transaction reads the active chains' ids
// and versions (one small query) and reads again only the chains whose
// version differs from the cached one. Another process or replica writing
// a chain therefore bumps its version and this process reloads it: the
// cache is never trusted beyond what the store says.
type chainCache struct {
	mu sync.Mutex
	m  map[int64]cachedChain
}

// cachedChain is a chain as committed at version, with its member rows as
// written (chainTx.loaded, for saving only changed members). Neither is
// modified once cached: transactions get clones.
type cachedChain struct {
	version int64
	c       *chain.Chain
	rows    map[string]memberRow
	// members indexes c's members, so that saving compares a member with
	// its committed self before encoding it (chainTx.saveMembers).
	members map[string]*chain.Member
}

// newCached caches c at version with its member rows. c must not be
// changed afterwards: callers that keep using it pass a clone.
func newCached(version int64, c *chain.Chain, rows map[string]memberRow) cachedChain {
	e := cachedChain{version: version, c: c, rows: rows, members: make(map[string]*chain.Member, len(c.Members))}
	for _, m := range e.c.Members {
		e.members[m.Project] = m
	}
	return e
}

// sameMember reports whether a and b would be written as the same row.
func sameMember(a, b *chain.Member) bool {
	return a.Project == b.Project && a.ProjectID == b.ProjectID && a.State == b.State &&
		slices.Equal(a.Upstreams, b.Upstreams) && a.Why == b.Why && a.Requeued == b.Requeued &&
		a.Builds == b.Builds && a.ActionID == b.ActionID && a.PipelineID == b.PipelineID &&
		a.PipelineURL == b.PipelineURL && a.TriggeredAt.Equal(b.TriggeredAt) && a.FinishedAt.Equal(b.FinishedAt)
}

func newChainCache() *chainCache { return &chainCache{m: map[int64]cachedChain{}} }

func (cc *chainCache) get(id, version int64) (cachedChain, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.m[id]
	return e, ok && e.version == version
}

// commit takes in what a committed transaction read and wrote: active is
// every chain id the store listed as active, fresh the chains as they now
// are. Chains no longer active leave the cache; an entry is never replaced
// by an older version (another transaction of this process may have
// committed after this one, and updated the cache first).
func (cc *chainCache) commit(active map[int64]bool, fresh map[int64]cachedChain) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if active != nil {
		for id := range cc.m {
			if _, ok := fresh[id]; !ok && !active[id] {
				delete(cc.m, id)
			}
		}
	}
	for id, e := range fresh {
		if !e.c.State.Active() {
			delete(cc.m, id)
			continue
		}
		if old, ok := cc.m[id]; !ok || old.version < e.version {
			cc.m[id] = e
		}
	}
}

// cachedActiveChains is ActiveChains through the cache.
func (t chainTx) cachedActiveChains(ctx context.Context) ([]*chain.Chain, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT id, version FROM chains WHERE state IN ($1, $2) ORDER BY id`,
		string(chain.Running), string(chain.Blocked))
	if err != nil {
		return nil, fmt.Errorf("read active chains: %w", err)
	}
	type idVersion struct{ id, version int64 }
	var list []idVersion
	for rows.Next() {
		var iv idVersion
		if err := rows.Scan(&iv.id, &iv.version); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read active chains: %w", err)
		}
		list = append(list, iv)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read active chains: %w", err)
	}
	out := make([]*chain.Chain, len(list))
	var missing []any
	var ph []string
	at := map[int64]int{}
	for i, iv := range list {
		t.cc.active[iv.id] = true
		if e, ok := t.cc.cache.get(iv.id, iv.version); ok {
			out[i] = e.c.Clone()
			t.loaded[iv.id] = e.rows
			t.cc.pristine[iv.id] = e.members
			t.cc.fresh[iv.id] = e
			continue
		}
		at[iv.id] = i
		missing = append(missing, iv.id)
		ph = append(ph, fmt.Sprintf("$%d", len(missing)))
	}
	if len(missing) > 0 {
		q := `SELECT ` + chainColumns + ` FROM chains WHERE state IN ($1, $2) ORDER BY id`
		args := []any{string(chain.Running), string(chain.Blocked)}
		if len(missing) < 200 {
			q = `SELECT ` + chainColumns + ` FROM chains WHERE id IN (` + strings.Join(ph, ", ") + `) ORDER BY id`
			args = missing
		}
		loaded, err := t.queryChains(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		for _, c := range loaded {
			i, ok := at[c.ID]
			if !ok {
				continue
			}
			out[i] = c
			e := newCached(list[i].version, c.Clone(), t.loaded[c.ID])
			t.cc.fresh[c.ID] = e
			t.cc.pristine[c.ID] = e.members
		}
	}
	// Every listed chain was found: the write lock is held.
	return slices.DeleteFunc(out, func(c *chain.Chain) bool { return c == nil }), nil
}

// txCache is one UpdateChains transaction's view of the cache.
type txCache struct {
	cache  *chainCache
	active map[int64]bool        // listed active by ActiveChains; nil if it was not called
	fresh  map[int64]cachedChain // read or written here, as committed if the transaction is
	// pristine are the members of the chains handed out, as loaded.
	pristine map[int64]map[string]*chain.Member
}
