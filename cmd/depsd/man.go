package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd writes the man pages, one per command, from the same help
// texts as --help (make man calls it at build time). Hidden: it is for
// packagers, not users.
func newManCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "man DIR",
		Short:   "Write the man pages into DIR",
		Long:    "man writes a man page (section 1) for depsd and every command into DIR, from the same texts as --help.",
		Example: "  depsd man share/man/man1",
		Hidden:  true,
		Args:    exactArgs(1, "one DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // reproducible pages: no date
			header := &doc.GenManHeader{Title: "DEPSD", Section: "1", Source: "depsd " + buildVersion(), Manual: "depsd manual"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("write man pages: %w", err)
			}
			fmt.Fprintf(a.stdout, "man pages written to %s\n", args[0])
			return nil
		},
	}
}
