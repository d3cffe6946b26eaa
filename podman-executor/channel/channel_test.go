package channel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// syncBuffer is an io.Writer safe to read while Run writes it.
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

// startLoop runs the container's loop with the host's sh on a channel in
// a temporary directory, as podman would run it in the job container,
// with a directory beside it for the container's tmpfs (jobDir).
func startLoop(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	dir := filepath.Join(t.TempDir(), "channel")
	if err := Create(dir); err != nil {
		t.Fatal(err)
	}
	if !Exists(dir) {
		t.Fatal("Exists after Create is false")
	}
	if err := os.Mkdir(jobDir(dir), 0o777); err != nil {
		t.Fatal(err)
	}
	loop := Loop(dir, jobDir(dir))
	cmd := exec.Command(sh, loop[1:]...)
	// Its own process group, so that cleanup ends the stages it started
	// too: a stage left running would write into the directory while
	// TempDir's cleanup removes it.
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pgid := cmd.Process.Pid
		_ = unix.Kill(-pgid, unix.SIGKILL)
		_ = cmd.Wait()
		// A killed process may still finish the write it was in: remove
		// the directories until they stay removed.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if os.RemoveAll(dir) == nil && os.RemoveAll(jobDir(dir)) == nil {
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Ready(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// jobDir stands in, on the host, for the loop's tmpfs of the channel in
// dir.
func jobDir(dir string) string { return dir + "-job" }

// busy runs BusyCommand for the channel in dir with the host's sh.
func busy(t *testing.T, dir string) bool {
	t.Helper()
	c := BusyCommand(dir, jobDir(dir))
	out, err := exec.Command(c[0], c[1:]...).Output()
	if err != nil {
		t.Fatalf("busy check: %v", err)
	}
	return strings.TrimSpace(string(out)) == "busy"
}

func TestRunStreamsOutputAndReturnsTheExitCode(t *testing.T) {
	dir := startLoop(t)
	tests := []struct {
		name, script, want string
		code               int
	}{
		{"success", "echo one\necho two >&2\n", "one\ntwo\n", 0},
		{"failure", "echo before\nexit 3\n", "before\n", 3},
		{"large output", "i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done\n", "line-2999-", 0},
		{"background child keeps stdout", "sleep 5 &\necho fg\n", "fg\n", 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out syncBuffer
			code, err := Run(context.Background(), dir, Stage{ID: "s" + string(rune('a'+i)), Script: strings.NewReader(tt.script), Out: &out})
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("code %d, want %d", code, tt.code)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output %q lacks %q", out.String(), tt.want)
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, "s*"))
	if len(left) > 0 {
		t.Errorf("stage files left: %v", left)
	}
}

func TestRunWithoutLoopIsNotRunning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "channel")
	if err := Create(dir); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), dir, Stage{ID: "x", Script: strings.NewReader("true\n"), Out: &syncBuffer{}})
	if !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err = %v, want ErrNotRunning", err)
	}
}

func TestRunCanceledReturnsAndPIDFileNamesTheShell(t *testing.T) {
	dir := startLoop(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	res := make(chan error, 1)
	go func() {
		_, err := Run(ctx, dir, Stage{ID: "long", Script: strings.NewReader("echo started\nexec sleep 300\n"), Out: &out})
		res <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "started") {
		if time.Now().After(deadline) {
			t.Fatal("stage never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid, err := os.ReadFile(filepath.Join(jobDir(dir), "long.pid"))
	if err != nil || len(bytes.TrimSpace(pid)) == 0 {
		t.Fatalf("pid file: %q %v", pid, err)
	}
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	_ = exec.Command("kill", strings.TrimSpace(string(pid))).Run()
}

func TestRunAskesAliveWhileSilent(t *testing.T) {
	dir := startLoop(t)
	gone := errors.New("container gone")
	_, err := Run(context.Background(), dir, Stage{ID: "silent", Script: strings.NewReader("exec sleep 300\n"), Out: &syncBuffer{},
		Alive: func() error { return gone }, Check: time.Millisecond})
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the Alive error", err)
	}
}

func TestRunRefusesIDsThatLeaveTheDirectory(t *testing.T) {
	if _, err := Run(context.Background(), t.TempDir(), Stage{ID: "../x", Script: strings.NewReader(""), Out: &syncBuffer{}}); err == nil {
		t.Fatal("no error for ../x")
	}
}

func TestBusyWhileAStageRunsEvenWithoutItsDriver(t *testing.T) {
	dir := startLoop(t)
	if busy(t, dir) {
		t.Fatal("busy before any stage")
	}
	if err := unix.Mkfifo(filepath.Join(dir, "go"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	res := make(chan error, 1)
	go func() {
		_, err := Run(ctx, dir, Stage{ID: "orphan", Script: strings.NewReader("echo started\nread x <" + filepath.Join(dir, "go") + "\n"), Out: &out})
		res <- err
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "started") })
	if !busy(t, dir) {
		t.Error("not busy while the stage runs")
	}
	// The driver goes away (its files stay, as after a SIGKILL): the
	// stage still ends, and then the channel is no longer busy.
	cancel()
	<-res
	if err := os.WriteFile(filepath.Join(dir, "orphan.done"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte("x\n"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !busy(t, dir) })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stageNames are the stages GitLab Runner 17.9 calls run with (the
// custom executor's stage list), plus step_* names: a job that learns a
// stage's file name plants links for all of them.
var stageNames = []string{"prepare_script", "get_sources", "clear_worktree", "restore_cache", "download_artifacts",
	"step_script", "step_release", "build_script", "after_script", "archive_cache", "archive_cache_on_failure",
	"upload_artifacts_on_success", "upload_artifacts_on_failure", "cleanup_file_variables"}

// TestRunNeverWritesThroughPlantedLinks: the job learns a stage's file
// name in the channel (stage-PID) and plants symbolic links, for every
// stage name and hundreds of PIDs, in every directory of the channel,
// pointing at host files. The driver (root with rootful podman) must not
// write, truncate or chmod through any of them: the sentinels keep their
// content and mode, and the stages still run. (The links for the files
// the container's side writes itself, .pid and .end, are left out here:
// in a container they are in its own tmpfs, but this test's loop runs on
// the host, where its writes would follow them. TestRealRunnerChannelLinks,
// in ../integration, plants those too.)
func TestRunNeverWritesThroughPlantedLinks(t *testing.T) {
	dir := startLoop(t)
	sentinels := t.TempDir()
	const content = "precious\n"
	exts := []string{".in", ".out", ".done"}
	for _, ext := range exts {
		if err := os.WriteFile(filepath.Join(sentinels, "target"+ext), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{dir, jobDir(dir)}
	for _, d := range dirs {
		for _, stage := range stageNames {
			for pid := 1000; pid < 1200; pid++ {
				for _, ext := range exts {
					if ext != ".in" && (pid < 1100 || pid > 1102) {
						continue // the FIFOs' names only where the stages below run: links are slow to make
					}
					if err := os.Symlink(filepath.Join(sentinels, "target"+ext), filepath.Join(d, fmt.Sprintf("%s-%d%s", stage, pid, ext))); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	for i, stage := range []string{"after_script", "archive_cache", "cleanup_file_variables"} {
		var out syncBuffer
		id := fmt.Sprintf("%s-%d", stage, 1100+i)
		code, err := Run(context.Background(), dir, Stage{ID: id, Script: strings.NewReader("echo ran-" + stage + "\n"), Out: &out})
		if err != nil || code != 0 || !strings.Contains(out.String(), "ran-"+stage) {
			t.Errorf("stage %s: code %d, err %v, output %q", id, code, err, out.String())
		}
	}
	for _, ext := range exts {
		p := filepath.Join(sentinels, "target"+ext)
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if string(b) != content || st.Mode() != 0o600 {
			t.Errorf("sentinel %s: mode %v, content %q; want -rw------- and %q", "target"+ext, st.Mode(), b, content)
		}
	}
}
