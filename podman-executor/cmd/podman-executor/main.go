// Command podman-executor is a GitLab Runner custom executor driver that
// runs jobs in podman containers. The runner calls it once per stage:
//
//	podman-executor [--config FILE] config|prepare|cleanup
//	podman-executor [--config FILE] run SCRIPT STAGE
//	podman-executor [--config FILE] gc [--max-age D] [--cache-max-age D] [--dry-run]
//	podman-executor version
//
// main only dispatches stages and maps their outcome to exit codes; the
// stages live in package executor.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"gitlab.com/depsd/depsd/podman-executor/container"
	"gitlab.com/depsd/depsd/podman-executor/executor"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run executes one stage and returns the process exit code.
func run(args, environ []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "podman-executor")
	job, jobErr := executor.ParseJob(environ)
	codes := job.Codes

	global := flag.NewFlagSet("podman-executor", flag.ContinueOnError)
	global.SetOutput(stderr)
	configPath := global.String("config", "", "driver config file (default $PODMAN_EXECUTOR_CONFIG or "+executor.DefaultConfigPath+")")
	if err := global.Parse(args); err != nil {
		return codes.SystemFailure
	}
	args = global.Args()
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: podman-executor [--config FILE] config|prepare|run SCRIPT STAGE|cleanup|gc|version")
		return codes.SystemFailure
	}
	stage := args[0]
	if stage == "version" {
		fmt.Fprintln(stdout, executor.Name, buildVersion())
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// The config stage's stdout is parsed as JSON: messages go to stderr.
	logOut := stdout
	if stage == "config" {
		logOut = stderr
	}
	err := executor.Guard(stage, func() error {
		if jobErr != nil {
			// The payload only refines services and credentials: go on
			// with what CUSTOM_ENV_* says.
			log.Warn("job response unusable", "err", jobErr)
		}
		cfg, err := loadConfig(*configPath, job.Driver)
		if err != nil {
			return err
		}
		e := &executor.Executor{Config: cfg, Job: job, Stdout: logOut, Stderr: stderr, Log: log}
		if stage == "config" {
			return e.ConfigStage(stdout)
		}
		if err := connect(ctx, e); err != nil {
			return err
		}
		return dispatch(ctx, e, stage, args[1:], stdout, stderr)
	})
	return executor.ExitCode(err, codes, stderr)
}

// dispatch runs the stages that need podman.
func dispatch(ctx context.Context, e *executor.Executor, stage string, args []string, stdout, stderr io.Writer) error {
	switch stage {
	case "prepare":
		return e.PrepareStage(ctx)
	case "run":
		if len(args) < 2 {
			return errors.New("usage: podman-executor run SCRIPT STAGE")
		}
		return e.RunStage(ctx, args[0], args[1])
	case "cleanup":
		return e.CleanupStage(ctx)
	case "gc":
		fs := flag.NewFlagSet("gc", flag.ContinueOnError)
		fs.SetOutput(stderr)
		o := executor.GCOptions{}
		fs.DurationVar(&o.MaxAge, "max-age", e.Config.GCMaxAge.Duration, "remove job containers and networks older than this whose job is over")
		fs.DurationVar(&o.CacheMaxAge, "cache-max-age", e.Config.GCCacheMaxAge.Duration, "remove cache directories unused for this long (0: keep all)")
		fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be removed, remove nothing")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return e.GCStage(ctx, o, stdout)
	default:
		return fmt.Errorf("unknown stage %q", stage)
	}
}

// loadConfig reads the driver config named by --config, else
// $PODMAN_EXECUTOR_CONFIG, else the default path (which may be absent).
func loadConfig(flagPath string, env map[string]string) (executor.Config, error) {
	path, explicit := flagPath, flagPath != ""
	if !explicit && env["PODMAN_EXECUTOR_CONFIG"] != "" {
		path, explicit = env["PODMAN_EXECUTOR_CONFIG"], true
	}
	if !explicit {
		path = executor.DefaultConfigPath
	}
	defaults := executor.Defaults(executor.Host{
		Env:      env,
		UID:      os.Getuid(),
		Usable:   func(p string) bool { return syscall.Access(p, 2) == nil },
		LookPath: exec.LookPath,
	})
	return executor.LoadConfig(path, explicit, defaults)
}

// connect dials the podman service; failing to reach it is a system
// failure like any other podman error.
func connect(ctx context.Context, e *executor.Executor) error {
	p, err := container.Dial(ctx, e.Config.PodmanURL)
	if err != nil {
		return err
	}
	e.Engine = p
	return nil
}
