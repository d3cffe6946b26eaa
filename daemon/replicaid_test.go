package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// Two processes started with the same --replica-id (a copied deployment)
// share one store: exactly one of them leads. The leader lease names the
// process, not the replica id, or both would take themselves for its holder.
func TestSameReplicaIDLeadsOnce(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian:12\n"})
	state := filepath.Join(t.TempDir(), "depsd.db")
	var daemons []*Daemon
	for range 2 {
		gl, cfg := testClient(t, srv), testConfig(t, srv)
		cfg.State = state
		ctx, cancel := context.WithCancel(context.Background())
		d, err := New(ctx, Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl, ReplicaID: "same", LeaderLease: time.Second})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		daemons = append(daemons, d)
	}
	leaders := func() int {
		n := 0
		for _, d := range daemons {
			if st, err := d.Status(context.Background()); err == nil && st.Leading {
				n++
			}
		}
		return n
	}
	eventually(t, "one of them leads", func() bool { return leaders() >= 1 })
	// Renewals come every third of a lease: watch for two.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := leaders(); n != 1 {
			t.Fatalf("%d processes lead at once", n)
		}
	}
}
