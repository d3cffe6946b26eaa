package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store/pgtest"
)

// TestWriteRoundTrips: a PostgreSQL write transaction begins holding the
// write lock in one round trip, and a pipelined one (UpdateChains) sends
// COMMIT with its last batch. Every writer in line waits for these round
// trips: an empty write costs two (it was three: BEGIN, the lock, COMMIT),
// an UpdateChains that only queues writes two as well (it was four), one
// that starts a chain as the inbox does three (it was nine: three look-ups
// of the pipeline and the chain id were a round trip each, and the active
// chains' versions one more, now read with the BEGIN), and one that
// records an event and applies it four: the insert reads the events
// ahead. Announced with chain.RecordingFirst (the recorder's quiet path),
// the recording and the event's look-up (its pipeline, or its action)
// go with the BEGIN: two.
func TestWriteRoundTrips(t *testing.T) {
	ctx := t.Context()
	proxy := newRoundTripCounter(t, pgtest.Database(t))
	s, err := Open(ctx, proxy.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One connection, so that every transaction runs on the one whose
	// statements are prepared already, and none is pinged for idling.
	s.db.SetMaxIdleConns(1)

	actions := 0
	addAction := func() error {
		return s.UpdateChains(ctx, func(tx chain.Tx) error {
			actions++
			return tx.AddAction(ctx, chain.Action{ID: fmt.Sprintf("a-%d", actions), ChainID: 1, Project: "g/app",
				ProjectID: 7, Ref: "main", State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0})
		})
	}
	// What the inbox does for a success that starts a chain: the active
	// chains (and the next chain id with them), the event's one look-up,
	// then writes only.
	startChain := func() error {
		return s.UpdateChains(ctx, func(tx chain.Tx) error {
			if _, err := tx.ActiveChains(ctx); err != nil {
				return err
			}
			actions++
			if _, err := tx.PipelineSeen(ctx, int64(1000+actions)); err != nil {
				return err
			}
			id, err := tx.NewChainID(ctx)
			if err != nil {
				return err
			}
			c := &chain.Chain{ID: id, Mode: chain.Full, State: chain.Finished, Roots: []string{"g/base"}, StartedAt: t0, UpdatedAt: t0,
				Members: []*chain.Member{{Project: "g/base", ProjectID: 5, State: chain.Success}}}
			if err := tx.SaveChain(ctx, c); err != nil {
				return err
			}
			return tx.AddAction(ctx, chain.Action{ID: fmt.Sprintf("a-%d", actions), ChainID: id, Project: "g/app",
				ProjectID: 7, Ref: "main", State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0})
		})
	}
	recorded := 0
	// first: announced with chain.RecordingFirst, as the recorder does;
	// action: the event names its action (a pipeline depsd created).
	recordAndApply := func(first bool, action string) func() error {
		return func() error {
			recorded++
			ev := chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/base", PipelineID: int64(5000 + recorded), Status: "running",
				Variables: map[string]string{chain.VarActionID: action}}}
			evs := []chain.NewEvent{{Key: fmt.Sprintf("rt-%d", recorded), Event: ev}}
			return s.UpdateChains(announcedIf(ctx, first, evs), func(tx chain.Tx) error {
				return recordThenApply(ctx, tx, evs)
			})
		}
	}
	for _, c := range []struct {
		name string
		want int64
		run  func() error
	}{
		{"an empty write", 2, func() error { return s.write(ctx, func(*sql.Tx) error { return nil }) }},
		{"an UpdateChains adding an action", 2, addAction},
		{"an UpdateChains starting a chain", 3, startChain},
		{"an event recorded and applied in one UpdateChains", 4, recordAndApply(false, "")},
		{"the same, the recording announced (RecordingFirst)", 2, recordAndApply(true, "")},
		{"the same for an event naming its action", 2, recordAndApply(true, "a-1")},
		{"a read (BEGIN, ROLLBACK)", 2, func() error { return s.read(ctx, func(*sql.Tx) error { return nil }) }},
	} {
		for range 2 { // the first run prepares the statements
			if err := c.run(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		before := proxy.trips.Load()
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := proxy.trips.Load() - before; got != c.want {
			t.Errorf("%s took %d round trips, want %d", c.name, got, c.want)
		}
	}

	// The action went in: the batch's COMMIT committed it.
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		n, err := tx.CountActions(ctx, chain.ActionPending)
		if err == nil && n != actions {
			err = fmt.Errorf("%d actions stored, want %d", n, actions)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// announcedIf is ctx with evs announced (chain.RecordingFirst) as the
// recorder's quiet path does, if announce, or ctx.
func announcedIf(ctx context.Context, announce bool, evs []chain.NewEvent) context.Context {
	if announce {
		return chain.RecordingFirst(ctx, evs)
	}
	return ctx
}

// recordThenApply is what the recorder's quiet path does in its
// transaction: the active chains, the recording, then the event applied
// (its look-up) and marked.
func recordThenApply(ctx context.Context, tx chain.Tx, evs []chain.NewEvent) error {
	if _, err := tx.ActiveChains(ctx); err != nil {
		return err
	}
	if _, err := tx.RecordEvents(ctx, evs); err != nil {
		return err
	}
	se, ok, err := tx.NextEvent(ctx)
	if err != nil || !ok {
		return fmt.Errorf("next event: %v, %v", ok, err)
	}
	if id := se.Event.Pipeline.Variables[chain.VarActionID]; id != "" {
		if _, _, err := tx.Action(ctx, id); err != nil {
			return err
		}
	} else if _, err := tx.PipelineSeen(ctx, se.Event.Pipeline.PipelineID); err != nil {
		return err
	}
	return tx.MarkEvent(ctx, se.Seq, t0, "done")
}

// roundTripCounter is a TCP proxy in front of a PostgreSQL server that
// counts what the client sends: the protocol is request and answer, and
// pgx writes each query, or each batch, at once, so every read on the
// client's side is one round trip.
type roundTripCounter struct {
	dsn   string // the database's URL through the proxy
	trips atomic.Int64
}

func newRoundTripCounter(t *testing.T, dsn string) *roundTripCounter {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := u.Host
	u.Host = ln.Addr().String()
	p := &roundTripCounter{dsn: u.String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			upstream, err := net.Dial("tcp", server)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			open = append(open, client, upstream)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(client, upstream)
				client.Close()
			})
			wg.Go(func() {
				defer upstream.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := client.Read(buf)
					if n > 0 {
						p.trips.Add(1)
						if _, werr := upstream.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	return p
}
