package executor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

const svcName = jobName + "-svc0"

// TestServicesWaitedFor: prepare waits for each service's exposed ports
// or HEALTHCHECK; one that is not ready gets a warning with its logs and
// the job goes on.
func TestServicesWaitedFor(t *testing.T) {
	tests := []struct {
		name      string
		image     container.ImageConfig
		timeout   int
		listensAt int      // Listening answers true from this call on (0: never)
		health    []string // successive health check answers
		stopped   bool
		wantOut   []string
		notOut    []string
	}{
		{name: "port that opens late", image: container.ImageConfig{ExposedTCP: []int{6379}}, listensAt: 3,
			wantOut: []string{"Waiting for services to be up and running (timeout 30 seconds)"}, notOut: []string{"WARNING"}},
		{name: "port that never opens", image: container.ImageConfig{ExposedTCP: []int{6379, 8080}}, timeout: 1,
			wantOut: []string{"*** WARNING: Service docker.io/library/redis:7 probably didn't start properly", "nothing listens on TCP port 6379, 8080", "svc-log-1", "svc-log-2"}},
		{name: "healthcheck that turns healthy", image: container.ImageConfig{Healthcheck: []string{"CMD-SHELL", "redis-cli ping"}},
			health: []string{"starting", "unhealthy", "healthy"}, notOut: []string{"WARNING"}},
		{name: "healthcheck that stays unhealthy", image: container.ImageConfig{Healthcheck: []string{"CMD-SHELL", "redis-cli ping"}}, timeout: 1,
			health: []string{"unhealthy"}, wantOut: []string{"WARNING", `health check "CMD-SHELL redis-cli ping" says unhealthy`, "svc-log-2"}},
		{name: "stopped service warned at once", image: container.ImageConfig{ExposedTCP: []int{6379}}, timeout: 3600, stopped: true,
			wantOut: []string{"WARNING", "not running", "svc-log-2"}},
		{name: "disabled", image: container.ImageConfig{ExposedTCP: []int{6379}}, timeout: -1,
			notOut: []string{"Waiting for services", "WARNING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"CI_JOB_SERVICES": `[{"name":"redis:7","alias":"cache,db"}]`}, func(c *Config) {
				if tt.timeout != 0 {
					c.WaitForServicesTimeout = tt.timeout
				}
			})
			f.fake.Pull(context.Background(), "docker.io/library/redis:7", container.PullOptions{}, &strings.Builder{})
			f.fake.ImageConfigs = map[string]container.ImageConfig{"docker.io/library/redis:7": tt.image}
			f.fake.ContainerLogs = map[string][]string{svcName: {"svc-log-1\n", "svc-log-2\n"}}
			if tt.stopped {
				f.fake.StartExits = map[string]bool{svcName: true}
			}
			var mu sync.Mutex
			calls, checks := 0, 0
			f.e.Listening = func(_ context.Context, info container.Info, network string, port int, _ bool) bool {
				mu.Lock()
				defer mu.Unlock()
				if info.Name != svcName || network != jobName+"-net" {
					t.Errorf("probed %s on %s", info.Name, network)
				}
				calls++
				return tt.listensAt > 0 && calls >= tt.listensAt
			}
			f.fake.Health = func(name string) string {
				mu.Lock()
				defer mu.Unlock()
				h := tt.health[min(checks, len(tt.health)-1)]
				checks++
				return h
			}
			if err := f.e.PrepareStage(context.Background()); err != nil {
				t.Fatalf("prepare: %v\n%s", err, f.out)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(f.out.String(), w) {
					t.Errorf("job log lacks %q:\n%s", w, f.out)
				}
			}
			for _, w := range tt.notOut {
				if strings.Contains(f.out.String(), w) {
					t.Errorf("job log has %q:\n%s", w, f.out)
				}
			}
			if tt.listensAt > 0 && calls < tt.listensAt {
				t.Errorf("prepare returned after %d probes, before the port opened", calls)
			}
			if len(tt.health) > 0 && tt.health[len(tt.health)-1] == "healthy" && checks < len(tt.health) {
				t.Errorf("prepare returned after %d health checks, before healthy", checks)
			}
			if spec, _ := f.fake.Spec(svcName); !slices.Equal(spec.Networks[jobName+"-net"], []string{"cache", "db", "redis"}) {
				t.Errorf("service aliases %v", spec.Networks)
			}
		})
	}
}

// TestListeningPorts reads a real /proc/net/tcp layout.
func TestListeningPorts(t *testing.T) {
	const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000     0        0 31339 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:0050 0100007F:A2C5 06 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`
	got, err := ListeningPorts(strings.NewReader(procNetTCP))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{6379, 8080}) {
		t.Errorf("ports %v, want [6379 8080]", got)
	}
}

func FuzzListeningPorts(f *testing.F) {
	f.Add("h\n 0: 00000000:18EB 00000000:0000 0A x\n")
	f.Fuzz(func(t *testing.T, s string) {
		ports, _ := ListeningPorts(strings.NewReader(s))
		for _, p := range ports {
			if p < 0 || p > 65535 {
				t.Fatalf("port %d", p)
			}
		}
	})
}

// slowInspect is an engine whose Inspect of the service, once slow is
// set, answers only when the wait's deadline has passed: a podman slow to
// answer just then.
type slowInspect struct {
	Engine
	slow atomic.Bool
}

func (s *slowInspect) Inspect(ctx context.Context, name string) (container.Info, error) {
	if name == svcName && s.slow.Load() {
		<-ctx.Done()
		return container.Info{}, fmt.Errorf("inspect container %s: %w", name, ctx.Err())
	}
	return s.Engine.Inspect(ctx, name)
}

// TestServiceWarningSaysWhatWasMissing: when the check under way at the
// deadline is cut short by it (found in CI: podman's inspect took longer
// than what was left of the 2 s), the warning still says what the checks
// before found missing, not "context deadline exceeded".
func TestServiceWarningSaysWhatWasMissing(t *testing.T) {
	f := newFixture(t, map[string]string{"CI_JOB_SERVICES": `[{"name":"redis:7"}]`}, func(c *Config) { c.WaitForServicesTimeout = 1 })
	f.fake.Pull(context.Background(), "docker.io/library/redis:7", container.PullOptions{}, &strings.Builder{})
	f.fake.ImageConfigs = map[string]container.ImageConfig{"docker.io/library/redis:7": {ExposedTCP: []int{6379}}}
	engine := &slowInspect{Engine: f.e.Engine}
	f.e.Engine = engine
	f.e.Listening = func(context.Context, container.Info, string, int, bool) bool {
		engine.slow.Store(true) // the next check's inspect meets the deadline
		return false
	}
	if err := f.e.PrepareStage(context.Background()); err != nil {
		t.Fatalf("prepare: %v\n%s", err, f.out)
	}
	if out := f.out.String(); !strings.Contains(out, "nothing listens on TCP port 6379") || strings.Contains(out, "deadline exceeded") {
		t.Errorf("job log:\n%s\nwant the missing port, not the deadline", out)
	}
}
