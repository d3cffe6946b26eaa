package executor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/channel"
	"gitlab.com/depsd/depsd/podman-executor/container"
)

// shellCommand starts the stage's shell in the job container: it records
// its PID (so a canceled stage can be stopped) and becomes bash when the
// image has it, else sh; the script arrives on stdin.
func shellCommand(pidFile string) []string {
	return []string{"sh", "-c", "echo $$ >" + pidFile + " 2>/dev/null; " +
		"if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh"}
}

// signalCommand sends sig to the stage's shell and all its descendants,
// found through /proc; the list is taken before any signal, so reparented
// children are not missed.
func signalCommand(pidFile, sig string) []string {
	return []string{"sh", "-c", "t() { echo $1; for c in $(cat /proc/$1/task/*/children 2>/dev/null); do t $c; done; }; " +
		"p=$(cat " + pidFile + " 2>/dev/null) || exit 0; kill -" + sig + " $(t $p) 2>/dev/null; exit 0"}
}

// helperStage reports whether a stage runs in the helper container (with
// helper_image), as with GitLab's docker executor: everything but the
// user's own scripts (build_script, step_*, after_script).
func helperStage(stage string) bool {
	return stage != "build_script" && stage != "after_script" && !strings.HasPrefix(stage, "step_")
}

// execResult is how an exec ended.
type execResult struct {
	code int
	err  error
}

// RunStage feeds the script at scriptPath to a shell in the job container
// and streams its output to the job log. A non-zero exit is a BuildError;
// a podman failure is returned as is. When ctx ends (the runner's SIGTERM)
// the stage's processes get SIGTERM, then SIGKILL after StopGrace.
func (e *Executor) RunStage(ctx context.Context, scriptPath, stage string) error {
	script, err := os.Open(scriptPath)
	if err != nil {
		return fmt.Errorf("open script: %w", err)
	}
	defer script.Close()
	id, err := e.identity()
	if err != nil {
		return err
	}
	name, dir := id.JobName(), e.channelDir(id.JobName())
	if e.Config.HelperImage != "" && helperStage(stage) {
		name, dir = id.HelperName(), e.helperChannelDir(id.JobName())
	}
	pidFile := "/tmp/.podman-executor-" + clean(stage) + ".pid"

	// The stage outlives ctx on purpose: on cancel, stopStage ends the
	// process in the container and the stage returns by itself.
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	done := make(chan execResult, 1)
	if e.Config.StateDir != "" && channel.Exists(dir) {
		// Prepared with a stage channel: no podman call unless the stage
		// must be stopped or the container looks gone.
		stageID := clean(stage) + "-" + strconv.Itoa(os.Getpid())
		pidFile = channel.PIDFile(stageID)
		go func() {
			code, err := channel.Run(execCtx, dir, channel.Stage{ID: stageID, Script: script, Out: e.Stdout, Alive: e.alive(execCtx, name)})
			done <- execResult{code, err}
		}()
	} else {
		if err := e.connect(ctx); err != nil {
			return err
		}
		go func() {
			code, err := e.Engine.Exec(execCtx, name, container.Exec{
				Cmd: shellCommand(pidFile), Stdin: script, Stdout: e.Stdout, Stderr: e.Stderr,
			})
			done <- execResult{code, err}
		}()
	}

	var r execResult
	select {
	case r = <-done:
	case <-ctx.Done():
		e.Log.Info("stopping stage", "stage", stage, "container", name)
		if err := e.connect(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("%s: stop: %w", stage, err)
		}
		r = e.stopStage(name, pidFile, done)
		if r.err == nil {
			r.err = ErrCanceled
		}
		cancelExec()
		return fmt.Errorf("%s: %w", stage, r.err)
	}
	if r.err != nil {
		return r.err
	}
	if r.code != 0 {
		return &BuildError{Code: r.code}
	}
	return nil
}

// stopStage signals the stage's processes (TERM, then KILL after the
// grace period, then the whole container) and waits for the exec to end.
// It returns the exec's result, or an error if it never ended.
func (e *Executor) stopStage(name, pidFile string, done <-chan execResult) execResult {
	grace := e.Config.StopGrace.Duration
	steps := []struct {
		wait time.Duration
		do   func(ctx context.Context) error
	}{
		{grace, func(ctx context.Context) error {
			_, err := e.Engine.Exec(ctx, name, container.Exec{Cmd: signalCommand(pidFile, "TERM")})
			return err
		}},
		{2 * time.Second, func(ctx context.Context) error {
			_, err := e.Engine.Exec(ctx, name, container.Exec{Cmd: signalCommand(pidFile, "KILL")})
			return err
		}},
		{2 * time.Second, func(ctx context.Context) error { return e.Engine.Kill(ctx, name, "KILL") }},
	}
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.do(ctx); err != nil {
			e.Log.Warn("stop stage", "container", name, "err", err)
		}
		cancel()
		select {
		case r := <-done:
			return r
		case <-time.After(s.wait):
		}
	}
	return execResult{err: fmt.Errorf("processes in %s did not stop", name)}
}
