package demo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With Stay the demo prints the dashboard's URL, tells its story, and keeps
// serving the dashboard (showing the finished chain) until ctx ends.
func TestStayKeepsServingTheDashboard(t *testing.T) {
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, out, Options{PipelineTime: 50 * time.Millisecond, StateDir: t.TempDir(), Stay: true})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "press Ctrl-C to stop") {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("demo ended before staying: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("demo did not finish its story:\n%s", out)
		}
	}
	url := regexp.MustCompile(`dashboard: (http://\S+/)`).FindStringSubmatch(out.String())
	if url == nil {
		cancel()
		t.Fatalf("no dashboard URL printed:\n%s", out)
	}
	resp, err := http.Get(url[1])
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `href="/chains/1"`) {
		t.Errorf("dashboard after the demo: %d\n%s", resp.StatusCode, page)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo after Ctrl-C: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop when its context ended")
	}
}
