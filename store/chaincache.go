package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
//
// A transaction takes the cached chains it is handed out of the cache:
// they are its own (no copy, which would cost time in proportion to the
// chain) until it ends. Once it committed they go back, at the version
// they were saved at; when it rolls back they are dropped, so what it
// changed never reaches another transaction, which reads the chain from
// the store instead.
//
// It also keeps the projects the engine looked up (chainTx.Project, a round
// trip or two per event otherwise), valid while the store's "projects"
// generation, which every ApplyScan bumps and the same query reads, stays
// the same.
type chainCache struct {
	mu sync.Mutex
	m  map[int64]cachedChain

	projectsGen int64                    // generation of projects; 0: none
	projects    map[string]projectLookup // by path, found or not

	// versions are the active chains' ids and versions and the next free
	// chain id as a committed transaction read them, at the chains
	// generation chainsGen (0: none): on SQLite, a transaction that finds
	// the generation unchanged takes them instead of reading them again
	// (activeVersions), since every transaction that writes a chain
	// moves the generation on (SaveChain).
	chainsGen int64
	versions  []versionRow
}

// projectLookup is a project as found by path (ok false: none has it).
type projectLookup struct {
	p  chain.Project
	ok bool
}

// project returns the cached look-up of path if the cache is at gen.
func (cc *chainCache) project(gen int64, path string) (projectLookup, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if gen == 0 || gen != cc.projectsGen {
		return projectLookup{}, false
	}
	l, ok := cc.projects[path]
	return l, ok
}

// keepProject caches a look-up made at generation gen, emptying the cache
// first if it holds another generation's.
func (cc *chainCache) keepProject(gen int64, path string, l projectLookup) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if gen == 0 || gen < cc.projectsGen {
		return
	}
	if gen != cc.projectsGen || cc.projects == nil {
		cc.projectsGen, cc.projects = gen, map[string]projectLookup{}
	}
	cc.projects[path] = l
}

// cachedChain is a chain as committed at version.
type cachedChain struct {
	version int64
	c       *chain.Chain
	// reasons are the chain's reasons as stored at version: a save writes
	// only those added since (c.Reasons is the engine's, changed in place).
	reasons []chain.Reason
}

// stored returns the entry of c as the store now holds it at version.
func stored(c *chain.Chain, version int64) cachedChain {
	return cachedChain{version: version, c: c, reasons: slices.Clone(c.Reasons)}
}

func newChainCache() *chainCache { return &chainCache{m: map[int64]cachedChain{}} }

// clear empties the cache (the store is closing).
func (cc *chainCache) clear() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	clear(cc.m)
	cc.projectsGen, cc.projects = 0, nil
	cc.chainsGen, cc.versions = 0, nil
}

// keepVersions keeps rows, the active chains' versions and the next free
// id as read at chains generation gen in a transaction that committed.
func (cc *chainCache) keepVersions(gen int64, rows []versionRow) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if gen >= cc.chainsGen {
		cc.chainsGen, cc.versions = gen, rows
	}
}

// versionsAt returns the versions kept, if they were read at chains
// generation gen.
func (cc *chainCache) versionsAt(gen int64) ([]versionRow, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if gen == 0 || gen != cc.chainsGen {
		return nil, false
	}
	return cc.versions, true
}

// take removes the chain id from the cache and returns it if it is cached
// at version.
func (cc *chainCache) take(id, version int64) (cachedChain, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.m[id]
	if !ok || e.version != version {
		return cachedChain{}, false
	}
	delete(cc.m, id)
	return e, true
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

// activeVersionsQuery lists the active chains' ids and versions, with the
// projects' and chains' generations and the next free chain id: one round
// trip, or none when it comes with the BEGIN (readAhead). It has no
// parameters, so that it can go in the BEGIN's simple query.
var activeVersionsQuery = `SELECT 'chain', id, version FROM chains WHERE state IN ('` +
	string(chain.Running) + `', '` + string(chain.Blocked) + `')
		UNION ALL SELECT name, 0, n FROM generations WHERE name IN ('projects', 'chains')
		UNION ALL SELECT 'next id', 0, COALESCE(MAX(id), 0) + 1 FROM chains
		ORDER BY 1, 2`

// generationsQuery reads the generations activeVersionsQuery does, alone:
// while the chains' stays, the rest of its answer does too.
const generationsQuery = `SELECT name, 0, n FROM generations WHERE name IN ('projects', 'chains')`

// versionRow is a row of activeVersionsQuery.
type versionRow struct {
	kind        string
	id, version int64
}

// activeVersions runs activeVersionsQuery, or takes its rows read ahead.
// On SQLite, where the query is a statement of its own (PostgreSQL sends
// it with the BEGIN), it reads the generations first and takes the rest
// as this process last read it while the chains' generation stays: most
// transactions of a busy instance (webhooks settled as they are recorded)
// write no chain.
func (t chainTx) activeVersions(ctx context.Context) ([]versionRow, error) {
	if versions, ok := t.cc.versions.take(); ok {
		return versions, nil
	}
	if t.tx.pipe == nil {
		gens, err := t.queryVersions(ctx, generationsQuery)
		if err != nil {
			return nil, err
		}
		if kept, ok := t.cc.cache.versionsAt(generation(gens, "chains")); ok {
			return append(slices.Clip(kept), gens...), nil
		}
	}
	versions, err := t.queryVersions(ctx, activeVersionsQuery)
	if err != nil {
		return nil, err
	}
	if !t.cc.chainsWritten {
		// What the store held when this transaction began, kept for
		// the next ones once it commits (UpdateChains).
		t.cc.versionsRead = versions
	}
	return versions, nil
}

// queryVersions runs activeVersionsQuery or generationsQuery.
func (t chainTx) queryVersions(ctx context.Context, query string) ([]versionRow, error) {
	rows, err := t.tx.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read active chains: %w", err)
	}
	defer rows.Close()
	versions, err := scanVersions(rows)
	if err := errors.Join(err, rows.Err()); err != nil {
		return nil, fmt.Errorf("read active chains: %w", err)
	}
	return versions, nil
}

// generation is the generation name among rows of activeVersionsQuery,
// 0 if it is not there.
func generation(rows []versionRow, name string) int64 {
	for _, r := range rows {
		if r.kind == name {
			return r.version
		}
	}
	return 0
}

// keptVersions are the rows of versions a transaction may take instead of
// activeVersionsQuery's while the chains' generation stays: all but the
// generations, which it reads.
func keptVersions(versions []versionRow) []versionRow {
	return slices.DeleteFunc(slices.Clone(versions), func(r versionRow) bool {
		return r.kind == "projects" || r.kind == "chains"
	})
}

// scanVersions reads activeVersionsQuery's rows.
func scanVersions(rows rowScanner) ([]versionRow, error) {
	var out []versionRow
	for rows.Next() {
		var r versionRow
		if err := rows.Scan(&r.kind, &r.id, &r.version); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// parseVersions reads activeVersionsQuery's rows as a simple-protocol
// query returns them, each value in text.
func parseVersions(rows [][][]byte) ([]versionRow, error) {
	out := make([]versionRow, 0, len(rows))
	for _, r := range rows {
		id, err1 := strconv.ParseInt(string(r[1]), 10, 64)
		version, err2 := strconv.ParseInt(string(r[2]), 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("read active chains: %w", err)
		}
		out = append(out, versionRow{string(r[0]), id, version})
	}
	return out, nil
}

// cachedActiveChains is ActiveChains through the cache.
func (t chainTx) cachedActiveChains(ctx context.Context) ([]*chain.Chain, error) {
	versions, err := t.activeVersions(ctx)
	if err != nil {
		return nil, err
	}
	type idVersion struct{ id, version int64 }
	var list []idVersion
	for _, r := range versions {
		switch r.kind {
		case "projects":
			t.cc.projectsGen = r.version
		case "chains":
		case "next id":
			t.cc.learnNextID(r.version)
		default:
			list = append(list, idVersion{r.id, r.version})
		}
	}
	out := make([]*chain.Chain, len(list))
	var missing []any
	var ph []string
	at := map[int64]int{}
	for i, iv := range list {
		t.cc.active[iv.id] = true
		if e, ok := t.cc.fresh[iv.id]; ok && e.version == iv.version {
			out[i] = e.c // already this transaction's
			continue
		}
		if e, ok := t.cc.cache.take(iv.id, iv.version); ok {
			out[i] = e.c
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
			t.cc.fresh[c.ID] = stored(c, list[i].version)
		}
	}
	// Every listed chain was found: the write lock is held.
	return slices.DeleteFunc(out, func(c *chain.Chain) bool { return c == nil }), nil
}

// txCache is one UpdateChains transaction's view of the cache.
type txCache struct {
	cache  *chainCache
	active map[int64]bool // listed active by ActiveChains; nil if it was not called
	// fresh are the chains handed out or written here, at the version they
	// have in the store now: the cache's if the transaction commits.
	fresh map[int64]cachedChain
	// events are the unprocessed events NextEvent read ahead, oldest
	// first, less those marked since.
	events []aheadEvent
	// eventsDrained: the last read of events found fewer than it asked for.
	eventsDrained bool
	// marks are the events marked processed, not yet written (MarkEvent).
	marks []eventMark
	// newFrom is the lowest chain id free when the transaction first
	// learned it (0: not yet): a chain at or above it is one this
	// transaction created. nextID is the id NewChainID hands out next.
	// Both are read with the active chains, or by NewChainID: under the
	// write lock only this transaction adds chains.
	newFrom, nextID int64
	// projectsGen is the store's projects generation as this transaction
	// read it (0: not read): the write lock keeps it so until the end.
	projectsGen int64
	// chainsWritten: a chain was saved, and the chains generation moved
	// on (SaveChain). versionsRead is activeVersionsQuery's answer read
	// before that, for the cache once the transaction commits.
	chainsWritten bool
	versionsRead  []versionRow
	// versions is activeVersionsQuery read with the BEGIN (PostgreSQL),
	// for the first ActiveChains.
	versions *readAhead
	// recorded is the recording sent with the BEGIN, until
	// Tx.RecordEvents takes it; looked is the look-up sent with it, for
	// Action or PipelineSeen to take (only when no older event comes
	// first).
	recorded *recordingAhead
	looked   *lookAhead
}

// lookup returns the entry of c as this transaction knows it stored; false
// outside UpdateChains or when c is not the chain object handed out here.
func (tc *txCache) lookup(c *chain.Chain) (cachedChain, bool) {
	if tc == nil {
		return cachedChain{}, false
	}
	e, ok := tc.fresh[c.ID]
	return e, ok && e.c == c
}

// learnNextID takes in the lowest chain id free in the store. An id this
// transaction handed out already stays handed out.
func (tc *txCache) learnNextID(id int64) {
	if tc.newFrom == 0 {
		tc.newFrom = id
	}
	tc.nextID = max(tc.nextID, id)
}

// unstored reports whether c was created in this transaction and not
// saved yet: its id is at or above the lowest id free when it began.
func (tc *txCache) unstored(c *chain.Chain) bool {
	if tc == nil || tc.newFrom == 0 || c.ID < tc.newFrom {
		return false
	}
	_, saved := tc.fresh[c.ID]
	return !saved
}

// CheckChainCache compares this process's cached chains with the store and
// reports the first difference: a chain cached at the version the store
// holds, but with other content than the store's at that version. (A chain
// cached at an older version is not a difference: another process wrote
// it, and the next transaction reads it again.) It holds the write lock
// and reads every cached chain: a consistency check for tests and tools,
// not for the hot path.
func (s *Store) CheckChainCache(ctx context.Context) error {
	s.chains.mu.Lock()
	empty := len(s.chains.m) == 0
	s.chains.mu.Unlock()
	if empty {
		return nil // also once the store is closed
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		s.chains.mu.Lock()
		entries := maps.Clone(s.chains.m)
		s.chains.mu.Unlock()
		t := newChainTx(tx)
		for id, e := range entries {
			var version int64
			if err := tx.QueryRowContext(ctx, `SELECT version FROM chains WHERE id = $1`, id).Scan(&version); err != nil {
				return fmt.Errorf("check cached chain %d: %w", id, err)
			}
			if version != e.version {
				continue
			}
			stored, err := t.Chain(ctx, id)
			if err != nil {
				return fmt.Errorf("check cached chain %d: %w", id, err)
			}
			cached, err := chainRecord(e.c)
			if err != nil {
				return err
			}
			want, err := chainRecord(stored)
			if err != nil {
				return err
			}
			if cached != want {
				return fmt.Errorf("chain %d at version %d: cached\n%s\nstored\n%s", id, version, cached, want)
			}
		}
		return nil
	})
}

// chainRecord renders c as the store writes it, one line per row.
func chainRecord(c *chain.Chain) (string, error) {
	roots, err := encodeJSON(c.Roots)
	if err != nil {
		return "", err
	}
	skipped, err := encodeJSON(c.Skipped)
	if err != nil {
		return "", err
	}
	kind, validation, err := encodeKind(c)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chain %d %s %s %s %s %d %v %v %v %s %s\n", c.ID, c.Mode, c.State, roots, skipped, c.MergedInto,
		encodeTime(c.StartedAt), encodeTime(c.UpdatedAt), encodeTime(c.EndedAt), kind, validation)
	for _, r := range c.Reasons {
		fmt.Fprintf(&b, "reason %s %s %q %d %v\n", r.Kind, r.Project, r.Detail, r.PipelineID, encodeTime(r.At))
	}
	for _, m := range c.Members {
		r, err := rowOf(m)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "member %s %+v\n", m.Project, r)
	}
	return b.String(), nil
}
