// Command podman-executor is a GitLab Runner custom executor driver that
// runs jobs in podman containers. The runner calls it once per stage:
//
//	podman-executor [--config FILE] config|prepare|cleanup
//	podman-executor [--config FILE] run SCRIPT STAGE
//	podman-executor [--config FILE] gc [--max-age D] [--cache-max-age D] [--dry-run]
//	podman-executor [--config FILE] runner-config
//	podman-executor version
//	podman-executor --help | help
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
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
	"gitlab.com/depsd/depsd/podman-executor/executor"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// stageHelp lists the stages in the order the runner calls them, with
// what each does; --help prints it.
var stageHelp = [][2]string{
	{"config", "print the JSON the runner wants (builds_dir, cache_dir, job_env, ...); needs no podman"},
	{"prepare", "pull the job's image and services, start the services on a job network and the job container"},
	{"run SCRIPT STAGE", "run SCRIPT (a runner stage such as build_script) in the job container, output to the job log"},
	{"cleanup", "remove the job's containers, network and state directory; idempotent"},
	{"gc [flags]", "for cron: remove what crashed or killed jobs left behind, and unused caches (gc --help)"},
	{"runner-config", "print a [[runners]] section of gitlab-runner's config.toml calling this binary (with --config FILE)"},
	{"version", "print the version"},
}

// usage prints the command's help.
func usage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s [--config FILE] STAGE [ARGS]\n\n", executor.Name)
	fmt.Fprintf(w, "A GitLab Runner custom executor driver running jobs in podman containers.\nThe runner calls one stage per process:\n\n")
	for _, s := range stageHelp {
		fmt.Fprintf(w, "  %-18s %s\n", s[0], s[1])
	}
	fmt.Fprintf(w, "\nFlags:\n")
	global.SetOutput(w)
	global.PrintDefaults()
}

// gcFlags are gc's flags; zero durations mean "the driver config's".
type gcFlags struct {
	fs   *flag.FlagSet
	opts executor.GCOptions
}

func newGCFlags(stderr io.Writer) *gcFlags {
	g := &gcFlags{fs: flag.NewFlagSet("gc", flag.ContinueOnError)}
	g.fs.SetOutput(stderr)
	g.fs.DurationVar(&g.opts.MaxAge, "max-age", 0, "remove job containers, networks and state directories older than this whose job is over (default: the config's gc_max_age, 3h)")
	g.fs.DurationVar(&g.opts.CacheMaxAge, "cache-max-age", 0, "remove cache directories unused for this long (default: the config's gc_cache_max_age, 336h)")
	g.fs.BoolVar(&g.opts.DryRun, "dry-run", false, "list what would be removed, remove nothing")
	g.fs.Usage = func() {
		fmt.Fprintf(g.fs.Output(), "usage: %s [--config FILE] gc [flags]\n\nRemoves labelled jobs older than --max-age in which no stage runs, and cache\ndirectories unused for --cache-max-age. Nothing else on the host is touched.\n\nFlags:\n", executor.Name)
		g.fs.PrintDefaults()
	}
	return g
}

// isHelpFlag reports whether arg asks for help, as package flag reads it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// run executes one stage and returns the process exit code. Help, usage
// errors and unknown stages are answered before any config is read or
// podman is reached.
func run(args, environ []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "podman-executor")
	job, jobErr := executor.ParseJob(environ)
	codes := job.Codes

	global := flag.NewFlagSet(executor.Name, flag.ContinueOnError)
	global.SetOutput(stderr)
	configPath := global.String("config", "", "driver config file (default $PODMAN_EXECUTOR_CONFIG or "+executor.DefaultConfigPath+")")
	global.Usage = func() { usage(stderr, global) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, global)
			return 0
		}
		return codes.SystemFailure
	}
	args = global.Args()
	if len(args) == 0 {
		usage(stderr, global)
		return codes.SystemFailure
	}
	stage := args[0]
	gc := newGCFlags(stderr)
	switch stage {
	case "help":
		usage(stdout, global)
		return 0
	case "version":
		fmt.Fprintln(stdout, executor.Name, buildVersion())
		return 0
	case "runner-config":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "%s: runner-config takes no arguments, got %q\n", executor.Name, args[1:])
			return 2
		}
		if err := runnerConfig(*configPath, job.Driver, stdout); err != nil {
			fmt.Fprintf(stderr, "%s: runner-config: %v\n", executor.Name, err)
			return 1
		}
		return 0
	case "config", "prepare", "cleanup":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "%s: %s takes no arguments, got %q\n", executor.Name, stage, args[1:])
			return codes.SystemFailure
		}
	case "run":
		if len(args) != 3 {
			fmt.Fprintf(stderr, "usage: %s [--config FILE] run SCRIPT STAGE (got %d arguments)\n", executor.Name, len(args)-1)
			return codes.SystemFailure
		}
	case "gc":
		if slices.ContainsFunc(args[1:], isHelpFlag) {
			gc.fs.SetOutput(stdout)
			gc.fs.Usage()
			return 0
		}
		if err := gc.fs.Parse(args[1:]); err != nil {
			return codes.SystemFailure
		}
	default:
		fmt.Fprintf(stderr, "%s: unknown stage %q\n\n", executor.Name, stage)
		usage(stderr, global)
		return codes.SystemFailure
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// The config stage's stdout is parsed as JSON: messages go to stderr.
	logOut := stdout
	if stage == "config" {
		logOut = stderr
	}
	err := executor.Guard(stage, func() error {
		if jobErr != nil && stage != "gc" {
			// The job response says which job and project this is: no
			// stage of a job goes on without it.
			return jobErr
		}
		cfg, err := loadConfig(*configPath, job.Driver)
		if err != nil {
			return err
		}
		traced := stage
		if stage == "run" {
			traced += ":" + args[2]
		}
		tr, closeTrace := openTrace(job.Driver["PODMAN_EXECUTOR_TRACE"], traced, log)
		defer closeTrace()
		e := &executor.Executor{Config: cfg, Job: job, Stdout: logOut, Stderr: stderr, Log: log, Trace: tr,
			Dial: func(ctx context.Context) (executor.Engine, error) {
				end := tr.Span("Dial", "")
				eng, err := container.Dial(ctx, cfg.PodmanURL)
				end(err)
				if err != nil || tr == nil {
					return eng, err
				}
				return tr.Engine(eng), nil
			}}
		switch stage {
		case "config":
			return e.ConfigStage(stdout)
		case "prepare":
			return e.PrepareStage(ctx)
		case "run":
			return e.RunStage(ctx, args[1], args[2])
		case "cleanup":
			return e.CleanupStage(ctx)
		default: // gc
			o := gc.opts
			set := map[string]bool{}
			gc.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			if !set["max-age"] {
				o.MaxAge = cfg.GCMaxAge.Duration
			}
			if !set["cache-max-age"] {
				o.CacheMaxAge = cfg.GCCacheMaxAge.Duration
			}
			return e.GCStage(ctx, o, stdout)
		}
	})
	return executor.ExitCode(err, codes, stderr)
}

// openTrace opens the trace file path (PODMAN_EXECUTOR_TRACE; "" traces
// nothing) for appending one line per podman call of stage; the returned
// func closes it. A file that cannot be opened is logged, not fatal.
func openTrace(path, stage string, log *slog.Logger) (*executor.Tracer, func()) {
	if path == "" {
		return nil, func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		log.Warn("trace file", "err", err)
		return nil, func() {}
	}
	tr := executor.NewTracer(f, stage, time.Now)
	end := tr.Span("Stage", "")
	return tr, func() { end(nil); f.Close() }
}

// runnerConfig prints the runner's [[runners]] section for this binary
// and the driver config --config (or $PODMAN_EXECUTOR_CONFIG) names,
// passed on in each stage's arguments (read, so a broken one is said now
// rather than at the first job).
func runnerConfig(flagPath string, env map[string]string, stdout io.Writer) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate this binary: %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return fmt.Errorf("locate this binary: %w", err)
	}
	path := flagPath
	if path == "" { // the runner's environment may lack it: pass it on
		path = env["PODMAN_EXECUTOR_CONFIG"]
	}
	if path != "" {
		if path, err = filepath.Abs(path); err != nil {
			return fmt.Errorf("config path: %w", err)
		}
	}
	cfg, err := loadConfig(path, env)
	if err != nil {
		return err
	}
	return executor.RunnerConfig(stdout, bin, path, cfg)
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
