// Command depsd keeps chains of container images on a GitLab instance
// rebuilt in dependency order. main only builds the command tree (one file
// per command, each made by a newXCmd function), sets up signals and turns
// results into exit codes; the work is in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	_ "time/tzdata" // schedule timezones work on hosts without a zoneinfo database

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem, or could not do its job
	exitUsage = 2 // the command line was wrong
)

func main() {
	limitMemory(os.LookupEnv)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultMemoryLimit is the Go runtime's soft memory limit unless
// GOMEMLIMIT says otherwise. Without one the heap may grow to twice what
// is live before a collection: at 50,000 projects in scope a scan's
// garbage took `depsd serve` and `depsd scan` to 180 MB resident with
// 35-55 MB live. Near the limit the runtime collects sooner and returns
// freed memory to the system; a process that needs more than the limit
// still gets it (the limit is soft; the collector's CPU share is capped).
const defaultMemoryLimit = 128 << 20

// limitMemory sets defaultMemoryLimit unless GOMEMLIMIT is set (the
// runtime then took it from there, "off" included).
func limitMemory(lookupEnv func(string) (string, bool)) {
	if _, ok := lookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

// run executes the command line args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(&app{stdout: stdout, stderr: stderr, env: os.LookupEnv})
	root.SetArgs(compatArgs(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(cmd, err, stderr)
}

// exitCode reports err, if it was not reported yet, and maps it to the
// exit code: usage errors 2, others 1.
func exitCode(cmd *cobra.Command, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	name := "depsd"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, ue.err, name)
		return exitUsage
	}
	if !errors.Is(err, errReported) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return exitFail
}

// usageError is a wrong command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef makes a usage error.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// errReported is returned by a command that already printed why it failed
// (depsd check, one line per directory): exit 1 without another message.
var errReported = errors.New("failed")

// compatArgs rewrites the single-dash long flags the standard flag package
// accepted (-json, -all) to the double-dash form, so scripts written for
// earlier versions keep working. Only names of real flags are rewritten,
// and nothing after "--".
func compatArgs(root *cobra.Command, args []string) []string {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && names[name] {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}
