package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/daemon"
)

// newSchedulesCmd: every schedule with its next and last fire and outcome,
// read from the state file.
func newSchedulesCmd(a *app) *cobra.Command {
	var (
		s      settings
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "schedules [--json]",
		Short: "List cron rebuilds, the maintenance rescan and watched images",
		Long: `schedules lists every schedule of the configuration (schedules, rescan,
watch) with its next fire, its last fire and that fire's outcome, as the
state file recorded them. It validates the schedules first and names the
entry that is wrong.`,
		Example: `  depsd schedules
  depsd schedules --config /etc/depsd/depsd.yaml --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			if err := cfg.Scheduler.Validate(nil); err != nil {
				return err
			}
			st, err := openExisting(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := daemon.ListSchedules(ctx, cfg.Scheduler, st, nil)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]any{"schedules": entries})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tTARGET\tSCHEDULE\tNEXT\tLAST\tOUTCOME")
			for _, e := range entries {
				spec := e.Spec
				if e.Timezone != "" {
					spec += " (" + e.Timezone + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Kind, e.Target, spec, when(e.Next), when(e.LastFire), orDash(e.LastOutcome))
			}
			return tw.Flush()
		},
	}
	s.addCommon(cmd.Flags(), "info")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04 MST")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
