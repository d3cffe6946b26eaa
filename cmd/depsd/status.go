package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/daemon"
)

// newStatusCmd: the replicas sharing the state, the leader, and the last
// run of each background job, read from the store.
func newStatusCmd(a *app) *cobra.Command {
	var (
		s      settings
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the store, the live serve replicas, the leader and the background jobs",
		Long: `status reads the state (an SQLite file or a PostgreSQL database) and shows
which depsd serve replicas are alive, which one leads (runs the schedules,
the maintenance job, the reconciler and the catch-up), and when each
background job last ran, where and with what result. A replica answers the
same, plus its own id, at GET /api/v1/status.`,
		Example: `  depsd status
  depsd status --state postgres://depsd@db.example.com/depsd --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, err := openExisting(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			status, err := daemon.ReadStatus(ctx, st, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, status)
			}
			fmt.Fprintf(a.stdout, "store:    %s %s\n", status.Store, status.StorePath)
			switch l := status.Leader; {
			case l == nil:
				fmt.Fprintln(a.stdout, "leader:   none")
			case l.Expired:
				fmt.Fprintf(a.stdout, "leader:   none (the lease of %s expired %s)\n", l.Replica, when(l.ExpiresAt))
			default:
				fmt.Fprintf(a.stdout, "leader:   %s since %s\n", l.Replica, when(l.Since))
			}
			fmt.Fprintf(a.stdout, "replicas: %d alive\n", len(status.Replicas))
			for _, r := range status.Replicas {
				fmt.Fprintf(a.stdout, "  %s since %s\n", r.Incarnation, when(r.Since))
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tLAST RUN\tBY\tRESULT")
			for _, j := range status.Jobs {
				result := "ok"
				if j.Error != "" {
					result = j.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.Name, when(j.FinishedAt), j.Replica, result)
			}
			return tw.Flush()
		},
	}
	s.addCommon(cmd.Flags(), "info")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
