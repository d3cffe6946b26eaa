// Command depsd keeps chains of container images on a GitLab instance
// rebuilt in dependency order. main only parses the command line, sets up
// signals and turns results into exit codes; the work is in the packages.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // schedule timezones work on hosts without a zoneinfo database
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem, or could not do its job
	exitUsage = 2 // the command line was wrong
)

// version is set at link time (-ldflags "-X main.version=v1.2.3").
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "scan":
		return runScan(ctx, args[1:], stdout, stderr)
	case "graph":
		return runGraph(ctx, args[1:], stdout, stderr)
	case "deps", "rdeps":
		return runDeps(ctx, args[0], args[1:], stdout, stderr)
	case "hooks":
		return runHooks(ctx, args[1:], stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "rebuild":
		return runRebuild(ctx, args[1:], stdout, stderr)
	case "chains":
		return runChains(ctx, args[1:], stdout, stderr)
	case "schedules":
		return runSchedules(ctx, args[1:], stdout, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "depsd", buildVersion())
		return exitOK
	case "help", "-h", "--help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "depsd: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: depsd <command> [flags]

commands:
  demo           run depsd end to end against a simulated GitLab
  check [--registry HOST] [--json] [--file NAME]... DIR...
                 print the dependencies declared by local checkouts
  scan           scan the GitLab scope into the state file
  graph [--format text|json|dot|mermaid|svg] [--around PROJECT [--depth N]]
                 print the scanned dependency graph (or the part around PROJECT)
  deps PROJECT   print the direct upstreams of a project
  rdeps [--all] PROJECT
                 print the downstreams of a project (--all: every wave)
  hooks sync [--url URL] [--dry-run]
                 give every project in scope exactly one depsd webhook
  serve [--listen ADDR] [--ui-listen ADDR] [--mode chain|first-level]
                 receive webhooks, rebuild downstream projects in order,
                 serve the dashboard (on --ui-listen if given)
  rebuild [--dry-run] PROJECT
                 start a chain at PROJECT (works with or without a daemon);
                 --dry-run prints the waves and the estimated time
  chains [--json] [ID]
                 show recent chains, or one chain and its members
  schedules      list cron rebuilds, the maintenance rescan and watched images
  version        print the version

Run 'depsd <command> -h' for the flags of a command.
`)
}
