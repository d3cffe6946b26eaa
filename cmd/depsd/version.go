package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/buildinfo"
)

func newVersionCmd(a *app) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Long:    "version prints the version depsd was built as: the release tag, or the module version and VCS revision Go recorded in the binary.",
		Example: "  depsd version\n  depsd version --verbose",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := buildinfo.Get()
			fmt.Fprintln(a.stdout, "depsd", info.Version)
			if verbose {
				fmt.Fprintf(a.stdout, "revision: %s\nmodified: %v\ngo: %s\n", orDash(info.Revision), info.Modified, info.GoVersion)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also print the VCS revision and the Go version")
	return cmd
}

// buildVersion is the version of this build (see package buildinfo).
func buildVersion() string { return buildinfo.Version() }
