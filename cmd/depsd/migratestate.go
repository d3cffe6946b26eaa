package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/store"
)

// newMigrateStateCmd: copy the whole state from one store to another,
// typically from the SQLite file to PostgreSQL.
func newMigrateStateCmd(a *app) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "migrate-state --from STATE --to STATE",
		Short: "Copy projects, chains, schedules and history to another store (SQLite → PostgreSQL)",
		Long: `migrate-state copies everything depsd keeps (projects and their dependency
files, scans, chains with their members, the outbox and inbox, schedules,
watched image digests, job history) from one store to another: an SQLite
file or a postgres:// URL on either side. The target's schema is created
first; it must hold no state, so a second run refuses instead of
overwriting or mixing. The copy is one transaction: a failure leaves the
target empty. Stop depsd serve on the source first; then point
--state/DEPSD_STATE at the target.`,
		Example: `  depsd migrate-state --from /var/lib/depsd/depsd.db --to postgres://depsd@db.example.com/depsd`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || to == "" {
				return usagef("both --from and --to are required")
			}
			if from == to {
				return usagef("--from and --to name the same store")
			}
			ctx := cmd.Context()
			if store.KindOf(from) == store.KindSQLite {
				if _, err := os.Stat(from); err != nil {
					return fmt.Errorf("--from %s: %w", from, err)
				}
			}
			src, err := store.Open(ctx, from)
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := store.Open(ctx, to)
			if err != nil {
				return err
			}
			defer dst.Close()
			counts, err := store.Copy(ctx, src, dst)
			if err != nil {
				return err
			}
			total := 0
			for _, c := range counts {
				total += c.Rows
				fmt.Fprintf(a.stdout, "%-14s %d\n", c.Table, c.Rows)
			}
			fmt.Fprintf(a.stdout, "copied %d rows from %s to %s\n", total, src.Path(), dst.Path())
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the store to copy: an SQLite file or a postgres:// URL")
	cmd.Flags().StringVar(&to, "to", "", "the empty store to copy into: an SQLite file or a postgres:// URL")
	return cmd
}
