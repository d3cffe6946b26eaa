package daemon

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
	"gitlab.com/depsd/depsd/verify"
)

// syncBuffer is a log sink several goroutines write to.
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

// TestFromLineCannotMakeDepsdProbeAnInternalService: a developer of a
// project in scope names an internal service (here a loopback server
// answering every request with a secret) in a FROM line. depsd verifies the
// project's image against it (images.verify: enforce) and watches it
// (watch_external), but it is neither the instance's registry nor listed
// by the operator: depsd never sends it a request, and what it shows of
// it (the freshness API, depsd schedules, the logs) says the host was
// refused, never an answer of the service. The instance's registry
// (loopback too, so listed in images.insecure_registries) is read as
// before.
func TestFromLineCannotMakeDepsdProbeAnInternalService(t *testing.T) {
	const secret = "internal-service-SECRET-answer"
	var probes atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, secret)
	}))
	defer internal.Close()
	probe := strings.TrimPrefix(internal.URL, "http://") + "/internal/admin:1"

	host := registrytest.Start(t)
	registrytest.Push(t, host+"/g/app:latest")
	srv := testGitLab(t, gitlabtest.Options{RegistryHost: host,
		Pipelines: gitlabtest.Behavior{Duration: 20 * time.Millisecond, Outcome: "success"}},
		map[string]string{"g/app": "FROM " + probe + "\n"})
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	cfg.Images.Verify = config.VerifyEnforce
	cfg.Images.InsecureRegistries = []string{host}
	cfg.Images.Publish = []string{"{registry}/{path}:latest"}
	cfg.Scheduler.WatchExternal = true
	cfg.Scheduler.WatchInterval = time.Hour
	var logs syncBuffer
	listening := make(chan string, 1)
	d, ctx := runDaemon(t, Options{Config: cfg, GitLab: gl, SchedulerClock: clocktest.New(time.Now()),
		Logger:       slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		PollInterval: 50 * time.Millisecond, ReconcileInterval: 100 * time.Millisecond,
		Listening: func(a string) { listening <- a }})
	base := "http://" + <-listening

	var id int64
	var err error
	eventually(t, "the rebuild to be accepted", func() bool {
		id, err = d.Engine().Rebuild(ctx, "g/app", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
		return err == nil
	})
	eventually(t, "the chain to end", func() bool {
		v, err := d.Engine().Chain(ctx, id)
		return err == nil && !v.State.Active()
	})
	var watched string
	eventually(t, "the watcher to check the image", func() bool {
		entries, err := ListSchedules(ctx, cfg.Scheduler, d.store, nil)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if e.Target == "docker.io/"+probe || e.Target == probe {
				watched = e.LastOutcome + " " + e.Err
				return e.Failures > 0 || e.Digest != ""
			}
		}
		return false
	})
	records, err := d.store.Verifications(ctx, "g/app")
	if err != nil || len(records) != 1 || len(records[0].Result.Upstreams) != 1 {
		t.Fatalf("verifications of g/app: %+v, %v", records, err)
	}
	up := records[0].Result.Upstreams[0]
	if n := probes.Load(); n != 0 {
		t.Errorf("depsd sent %d requests to the internal service named by a FROM line", n)
	}
	if up.State != verify.StateUnknown || up.Reason != verify.ReasonRefused || !strings.Contains(up.Detail, "images.external_registries") {
		t.Errorf("verdict against %s: %s %s %q; want unknown, %s", up.Upstream, up.State, up.Reason, up.Detail, verify.ReasonRefused)
	}
	resp, err := http.Get(base + "/api/v1/freshness")
	if err != nil {
		t.Fatal(err)
	}
	api, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for what, s := range map[string]string{"GET /api/v1/freshness": string(api), "depsd schedules": watched,
		"the verdict": up.Detail + " " + records[0].Result.Detail, "the log": logs.String()} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the internal service's answer:\n%s", what, s)
		}
	}
	if !strings.Contains(watched, "refused") {
		t.Errorf("depsd schedules says %q of the watched image: want it refused", watched)
	}
}
