// Command depsd keeps chains of container images on a GitLab instance
// rebuilt in dependency order. main only parses the command line, sets up
// signals and turns results into exit codes; the work is in the packages.
package main

import (
	"fmt"
	"io"
	"os"
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
	switch args[0] {
	case "check":
		return runCheck(args[1:], stdout, stderr)
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
  check [--registry HOST] [--json] [--file NAME]... DIR...
                 print the dependencies declared by local checkouts
  version        print the version

Run 'depsd <command> -h' for the flags of a command.
`)
}
