package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// app is what every command shares: where output goes and how the
// environment is read (os.LookupEnv; tests use t.Setenv).
type app struct {
	stdout, stderr io.Writer
	env            func(string) (string, bool)
}

// newRootCmd builds the command tree. A new command is a file with a
// newXCmd(a *app) *cobra.Command function, added here.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "depsd",
		Short: "Keep chains of container images on GitLab rebuilt in dependency order",
		Long: `depsd reads the Containerfiles and .gitlab-deps files of the projects of a
GitLab instance, builds the dependency graph between them, and when an image
is rebuilt it triggers the pipelines of everything downstream in order, each
exactly once.

Configuration comes from flags, then the environment (GITLAB_URL,
GITLAB_TOKEN, DEPSD_STATE, ...), then depsd.yaml, then defaults.`,
		Example: `  depsd demo                                  # end to end against a simulated GitLab
  depsd check --registry registry.example.com examples/*
  depsd scan --group infra/images --group apps
  depsd rdeps infra/images/base --all
  depsd serve --listen 127.0.0.1:8080`,
		Version:                    buildVersion(),
		SilenceErrors:              true,
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q", args[0])
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += fmt.Sprintf(" (did you mean %s?)", s[0])
				}
				return &usageError{errors.New(msg)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(a.stderr, cmd.UsageString())
			return usagef("no command given")
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("depsd {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		newDemoCmd(a),
		newCheckCmd(a),
		newScanCmd(a),
		newGraphCmd(a),
		newDepsCmd(a),
		newRdepsCmd(a),
		newHooksCmd(a),
		newServeCmd(a),
		newRebuildCmd(a),
		newChainsCmd(a),
		newValidationsCmd(a),
		newAuditCmd(a),
		newSchedulesCmd(a),
		newFreshnessCmd(a),
		newConfigCmd(a),
		newStatusCmd(a),
		newMigrateStateCmd(a),
		newVersionCmd(a),
		newManCmd(a),
	)
	return root
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q: %s takes none", args[0], cmd.Name())
	}
	return nil
}

// exactArgs wants n positional arguments, described by what.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

// maxArgs wants at most n positional arguments, described by what.
func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("want at most %s, got %d arguments", what, len(args))
		}
		return nil
	}
}
