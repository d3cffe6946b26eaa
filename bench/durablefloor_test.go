package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"gitlab.com/depsd/depsd/store"
)

// A durable floor is the least a webhook receiver that must not lose an
// acknowledged delivery can do: keep each body where a crash cannot take
// it, then answer. The null receiver of BenchmarkWebhookAck keeps nothing,
// so it is no fair floor for depsd, which answers only once the delivery
// is recorded. durableFloor keeps the bodies as cheaply as durability
// allows: bodies that arrive together are written and flushed together (a
// group commit, as depsd's recorder and PostgreSQL's WAL do), one flush
// for all of them, and each is answered once its flush is done.

// groupCommitter keeps batches of bodies durably; commit returns once
// every body of the batch is kept.
type groupCommitter interface {
	commit(ctx context.Context, bodies [][]byte) error
	close()
}

// durableFloor is an http.Handler that reads each body, hands it to the
// committer with whatever else arrived meanwhile, and answers 200 once it
// is kept (503 when keeping failed).
type durableFloor struct {
	in chan pending
	c  groupCommitter
}

type pending struct {
	body []byte
	done chan error
}

// newDurableFloor starts the committing goroutine; Close ends it.
func newDurableFloor(c groupCommitter) *durableFloor {
	f := &durableFloor{in: make(chan pending, 1024), c: c}
	go f.run()
	return f
}

func (f *durableFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	p := pending{body: body, done: make(chan error, 1)}
	f.in <- p
	if err := <-p.done; err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// run commits what is queued, as one batch, until Close.
func (f *durableFloor) run() {
	for first := range f.in {
		batch := []pending{first}
	more:
		for {
			select {
			case p, ok := <-f.in:
				if !ok {
					break more
				}
				batch = append(batch, p)
			default:
				break more
			}
		}
		bodies := make([][]byte, len(batch))
		for i, p := range batch {
			bodies[i] = p.body
		}
		err := f.c.commit(context.Background(), bodies)
		for _, p := range batch {
			p.done <- err
		}
	}
}

// Close stops the committer once the server in front has stopped.
func (f *durableFloor) Close() {
	close(f.in)
	f.c.close()
}

// fileCommitter appends length-prefixed bodies to a file and fdatasyncs:
// SQLite's floor, on the disk that holds depsd's state file.
type fileCommitter struct{ f *os.File }

func newFileCommitter(dir string) (*fileCommitter, error) {
	f, err := os.Create(filepath.Join(dir, "durable-floor.log"))
	if err != nil {
		return nil, err
	}
	return &fileCommitter{f: f}, nil
}

func (c *fileCommitter) commit(_ context.Context, bodies [][]byte) error {
	var buf []byte
	for _, body := range bodies {
		buf = binary.AppendUvarint(buf, uint64(len(body)))
		buf = append(buf, body...)
	}
	if _, err := c.f.Write(buf); err != nil {
		return err
	}
	return unix.Fdatasync(int(c.f.Fd()))
}

func (c *fileCommitter) close() { c.f.Close() }

// pgCommitter inserts the bodies into a table in one transaction
// (synchronous_commit on, as PostgreSQL runs by default and the
// benchmarks' server does): PostgreSQL's floor.
type pgCommitter struct{ conn *pgx.Conn }

func newPGCommitter(ctx context.Context, url string) (*pgCommitter, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	var sync string
	if _, err = conn.Exec(ctx, `CREATE TABLE floor_bodies (id bigserial PRIMARY KEY, body bytea NOT NULL)`); err == nil {
		err = conn.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sync)
	}
	if err == nil && sync != "on" {
		err = fmt.Errorf("synchronous_commit is %q, want on", sync)
	}
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("durable floor: %w", err)
	}
	return &pgCommitter{conn: conn}, nil
}

// newCommitter is the floor's committer over state: a PostgreSQL URL,
// or the directory of an SQLite state file.
func newCommitter(ctx context.Context, state string) (groupCommitter, error) {
	if store.KindOf(state) == store.KindPostgres {
		return newPGCommitter(ctx, state)
	}
	return newFileCommitter(state)
}

// durableFloorState is where the floor keeps its bodies for the store
// benchState picks: a fresh database of the same server, or the
// directory of a fresh state file.
func durableFloorState(b *testing.B) string {
	if storeKind() == "postgres" {
		return benchState(b)
	}
	return filepath.Dir(benchState(b))
}

func (c *pgCommitter) commit(ctx context.Context, bodies [][]byte) error {
	batch := &pgx.Batch{}
	batch.Queue(`BEGIN`)
	for _, body := range bodies {
		batch.Queue(`INSERT INTO floor_bodies (body) VALUES ($1)`, body)
	}
	batch.Queue(`COMMIT`)
	return c.conn.SendBatch(ctx, batch).Close()
}

func (c *pgCommitter) close() { c.conn.Close(context.Background()) }

// startDurableFloor serves the durable floor for the store benchState
// picks: a file beside the state on SQLite, a table in a fresh database
// of the same server on PostgreSQL.
func startDurableFloor(b *testing.B) (url string, stop func()) {
	b.Helper()
	c, err := newCommitter(b.Context(), durableFloorState(b))
	if err != nil {
		b.Fatal(err)
	}
	floor := newDurableFloor(c)
	srv := httptest.NewServer(floor)
	return srv.URL, func() {
		srv.Close()
		floor.Close()
	}
}

// TestDurableFloorKeepsWhatItAcknowledges: every body the floor answered
// 200 for is in its file, in one piece, however the bodies were batched.
func TestDurableFloorKeepsWhatItAcknowledges(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	floor := newDurableFloor(&fileCommitter{f: f})
	srv := httptest.NewServer(floor)
	const n = 200
	errs := make(chan error, n)
	for i := range n {
		go func() {
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	floor.Close()
	data, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(data) > 0 {
		size, k := binary.Uvarint(data)
		if k <= 0 || int(size) > len(data)-k {
			t.Fatalf("torn record at %d bytes from the end", len(data))
		}
		seen[string(data[k:k+int(size)])] = true
		data = data[k+int(size):]
	}
	for i := range n {
		if !seen[fmt.Sprintf(`{"n":%d}`, i)] {
			t.Errorf("body %d was acknowledged but is not in the file", i)
		}
	}
}
