package scan

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// blobGitLab serves ReadBlob only: project 1 holds the first read until
// released and then fails it (as when its files changed under the scan);
// every other project has the blob.
type blobGitLab struct {
	GitLab
	release chan struct{}
	mu      sync.Mutex
	reads   []int64
}

func (g *blobGitLab) ReadBlob(ctx context.Context, projectID int64, blobID string) ([]byte, error) {
	g.mu.Lock()
	g.reads = append(g.reads, projectID)
	g.mu.Unlock()
	if projectID == 1 {
		<-g.release
		return nil, errors.New("GET /projects/1/repository/blobs/…/raw: 404 Not Found")
	}
	return []byte("FROM alpine\n"), nil
}

// A project waiting for a blob another project is reading must not inherit
// that project's failure: it reads the blob itself. (It did inherit it, and
// its dependency files were dropped as "not found".)
func TestBlobReadFailureIsNotShared(t *testing.T) {
	ctx := context.Background()
	gl := &blobGitLab{release: make(chan struct{})}
	c := newBlobCache(nil)
	id := blobID([]byte("FROM alpine\n"))

	first := make(chan error, 1)
	go func() {
		_, _, err := c.get(ctx, gl, 1, id)
		first <- err
	}()
	// Wait (with a deadline) until project 1 is reading.
	deadline := time.Now().Add(10 * time.Second)
	for gl.readCount() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("project 1 never read the blob")
		}
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	var data []byte
	go func() {
		var err error
		data, _, err = c.get(ctx, gl, 2, id)
		second <- err
	}()
	// Wait until project 2 waits on project 1's read.
	for c.waitersOf(id) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("project 2 never waited for project 1's read")
		}
		time.Sleep(time.Millisecond)
	}
	close(gl.release)

	if err := <-first; err == nil {
		t.Error("project 1's read: want its error")
	}
	if err := <-second; err != nil {
		t.Fatalf("project 2 inherited project 1's failure: %v", err)
	}
	if string(data) != "FROM alpine\n" {
		t.Errorf("project 2 read %q", data)
	}
}

func (g *blobGitLab) readCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reads)
}

// waitersOf counts the calls waiting for the read of blob id.
func (c *blobCache) waitersOf(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[id]; ok {
		return e.waiters
	}
	return 0
}
