package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// A webhook that depsd answered 2xx is in its state file, even when the
// process is SIGKILLed right after the answer: deliveries stream in from
// several senders, the real depsd process is killed in the middle of the
// stream, and a new process on the same state file answers a resend of
// every delivery acknowledged before the kill as a duplicate (GitLab's
// resends carry the same Idempotency-Key), never as a new event.
func TestAcknowledgedWebhooksSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, linear()...)
	setup := newServeSetup(t, srv)
	proc := setup.start(t)
	info, ok := srv.Project(base)
	if !ok {
		t.Fatalf("no project %s", base)
	}
	body := func(i int) []byte {
		return fmt.Appendf(nil, `{"object_kind":"pipeline","object_attributes":{"id":%d,"ref":"main","tag":false,"sha":"%s","source":"push","status":"running","created_at":"2026-11-01 10:00:00 UTC","variables":[]},"project":{"id":%d,"path_with_namespace":"%s","default_branch":"main"}}`,
			900000+i, info.HeadCommit, info.ID, base)
	}
	post := func(i int) (status string, err error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+setup.listen+"/hooks/gitlab", bytes.NewReader(body(i)))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gitlab-Event", gitlabtest.PipelineHook)
		req.Header.Set("X-Gitlab-Token", secret)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("ack-%d", i))
		resp, err := setup.client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("answered %d %s", resp.StatusCode, b)
		}
		var answer struct{ Status string }
		if err := json.Unmarshal(b, &answer); err != nil {
			return "", fmt.Errorf("answer %q: %w", b, err)
		}
		return answer.Status, nil
	}

	// Eight senders post until the process is gone; the kill comes once
	// 300 deliveries were acknowledged, while others are in flight.
	const senders, killAfter = 8, 300
	var mu sync.Mutex
	var acked []int
	next := 0
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				status, err := post(i)
				if err != nil {
					select {
					case <-killed:
						return // the process is gone
					default:
					}
					t.Errorf("delivery %d before the kill: %v", i, err)
					return
				}
				if status != "accepted" {
					t.Errorf("delivery %d answered %q, want accepted", i, status)
					return
				}
				mu.Lock()
				acked = append(acked, i)
				n := len(acked)
				mu.Unlock()
				if n >= killAfter {
					once.Do(func() {
						close(killed)
						if err := proc.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
							t.Errorf("depsd exited cleanly on SIGKILL?")
						}
					})
				}
				select {
				case <-killed:
					return
				default:
				}
			}
		}()
	}
	senderDone := make(chan struct{})
	go func() { wg.Wait(); close(senderDone) }()
	select {
	case <-senderDone:
	case <-time.After(chainTimeout):
		t.Fatalf("the senders did not finish within %s\n%s", chainTimeout, setup.logs.tail(40))
	}
	if t.Failed() {
		t.FailNow()
	}

	setup.start(t)
	lost := 0
	for _, i := range acked {
		status, err := post(i)
		if err != nil {
			t.Fatalf("resend of delivery %d: %v", i, err)
		}
		if status != "duplicate" {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of the %d deliveries acknowledged before SIGKILL were not in the state file (a resend was accepted as new)", lost, len(acked))
	}
}
