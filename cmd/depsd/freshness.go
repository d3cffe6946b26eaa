package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/verify"
)

// newFreshnessCmd: which images are not built on their upstreams' current
// images, and since when, from the stored verifications.
func newFreshnessCmd(a *app) *cobra.Command {
	var (
		s      settings
		asJSON bool
		maxAge time.Duration
	)
	cmd := &cobra.Command{
		Use:   "freshness [--json] [--max-age 24h] [PROJECT...]",
		Short: "Show which images are not built on their upstreams' current images",
		Long: `freshness lists, from the state file, the last verification of each image
the projects publish, one row per project, image and platform, stalest
first: its state (fresh, stale, unknown), the image's digest, when its
upstream moved away from the image's base (STALE SINCE) and why.

It exits 1 when an image has been stale for longer than --max-age, so it
can run from cron or a monitoring check. Verifications are recorded by
depsd serve after a project's pipeline succeeds (see docs/verification.md;
until serve records them the list is empty).`,
		Example: `  depsd freshness
  depsd freshness --max-age 6h apps/shop apps/admin
  depsd freshness --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if maxAge < 0 {
				return usagef("--max-age %s: want a duration of 0 or more, such as 24h", maxAge)
			}
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, err := openExisting(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			records, err := st.Verifications(ctx, args...)
			if err != nil {
				return err
			}
			history := map[string][]verify.Seen{}
			for _, r := range records {
				for _, v := range r.Result.Upstreams {
					if _, ok := history[v.Upstream]; ok {
						continue
					}
					if history[v.Upstream], err = st.UpstreamHistory(ctx, v.Upstream); err != nil {
						return err
					}
				}
			}
			rows := verify.Freshness(records, history)
			overdue := verify.Overdue(rows, maxAge, time.Now())
			if asJSON {
				if err := writeJSON(a.stdout, map[string]any{"images": rows, "stale_beyond_max_age": len(overdue)}); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PROJECT\tIMAGE\tPLATFORM\tSTATE\tDIGEST\tSTALE SINCE\tDETAIL")
				for _, r := range rows {
					state := string(r.State)
					if r.Reason != "" {
						state += " (" + string(r.Reason) + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Project, r.Image, r.Platform, state,
						orDash(shortDigest(r.Digest)), when(r.StaleSince), r.Detail)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if len(rows) == 0 {
					fmt.Fprintln(a.stdout, "no verification recorded")
				}
			}
			if len(overdue) > 0 {
				names := make([]string, 0, len(overdue))
				for _, r := range overdue {
					names = append(names, fmt.Sprintf("%s %s (%s)", r.Project, r.Image, r.Platform))
				}
				return fmt.Errorf("%d image(s) stale for longer than %s: %s", len(overdue), maxAge, strings.Join(names, ", "))
			}
			return nil
		},
	}
	s.addCommon(cmd.Flags(), "info")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&maxAge, "max-age", 24*time.Hour, "exit 1 when an image has been stale for longer than this (0: any stale image)")
	return cmd
}

// shortDigest cuts a digest for a table: sha256:0123456789ab.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
