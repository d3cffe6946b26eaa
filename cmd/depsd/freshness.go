package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
)

// newFreshnessCmd: which images are not built on their upstreams' current
// images, and since when, from the stored verifications.
func newFreshnessCmd(a *app) *cobra.Command {
	var (
		s      settings
		asJSON bool
		only   string
		maxAge time.Duration
	)
	cmd := &cobra.Command{
		Use:   "freshness [--json] [--only STATE] [--max-age 24h] [PROJECT...]",
		Short: "Show which images are not built on their upstreams' current images",
		Long: `freshness lists, from the state file, the last verification of each image
the projects publish, one row per project, image and platform, stalest
first: its state (fresh, stale, unknown), the image's digest, when its
upstream moved away from the image's base (STALE SINCE), what will
rebuild a stale image (FIXED BY: a running chain that has the project
still to build, the cron schedule of the project or of a project it is
built from, a watch of the upstream image that has not yet seen its new
digest, or nothing) and why.

It exits 1 when an image has been stale for longer than --max-age, so it
can run from cron or a monitoring check. Verifications are recorded by
depsd serve after a project's pipeline succeeds (see docs/verification.md;
until serve records them the list is empty).`,
		Example: `  depsd freshness
  depsd freshness --max-age 6h apps/shop apps/admin
  depsd freshness --only stale
  depsd freshness --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if maxAge < 0 {
				return usagef("--max-age %s: want a duration of 0 or more, such as 24h", maxAge)
			}
			if only != "" && !slices.Contains(verify.States(), verify.State(only)) {
				return usagef("--only %s: want one of %s", only, strings.Join(stateNames(), ", "))
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
			engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
			if err != nil {
				return err
			}
			rep, err := daemon.Freshness(ctx, daemon.FreshnessSources{
				Store: st, Chains: engine,
				Schedules: func(ctx context.Context) ([]scheduler.Entry, error) {
					return daemon.ListSchedules(ctx, cfg.Scheduler, st, nil)
				},
			}, daemon.FreshnessQuery{Projects: args, State: verify.State(only), MaxAge: maxAge})
			if err != nil {
				return err
			}
			rows, overdue := rep.Images, rep.Overdue
			if asJSON {
				if rows == nil {
					rep.Images = []verify.Row{}
				}
				if err := writeJSON(a.stdout, rep); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PROJECT\tIMAGE\tPLATFORM\tSTATE\tDIGEST\tSTALE SINCE\tFIXED BY\tDETAIL")
				for _, r := range rows {
					state := string(r.State)
					if r.Reason != "" {
						state += " (" + string(r.Reason) + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Project, r.Image, r.Platform, state,
						orDash(shortDigest(r.Digest)), when(r.StaleSince), fixedBy(r.Fix), r.Detail)
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the same as GET /api/v1/freshness)")
	cmd.Flags().StringVar(&only, "only", "", "only images in this state: fresh, stale or unknown")
	cmd.Flags().DurationVar(&maxAge, "max-age", daemon.DefaultMaxAge, "exit 1 when an image has been stale for longer than this (0: any stale image)")
	return cmd
}

// fixedBy says in a table cell what will rebuild an image.
func fixedBy(f *verify.Fix) string {
	if f == nil {
		return "-"
	}
	switch f.Kind {
	case verify.FixChain:
		return fmt.Sprintf("chain %d", f.ChainID)
	case verify.FixSchedule:
		return "schedule of " + f.Project + " " + when(f.Next)
	case verify.FixWatch:
		return "watch of " + f.Image + " " + when(f.Next)
	case verify.FixMergeRequest:
		return f.URL
	}
	return "nothing"
}

// shortDigest cuts a digest for a table: sha256:0123456789ab.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// stateNames are the verification states, stalest first.
func stateNames() []string {
	var out []string
	for _, s := range verify.States() {
		out = append(out, string(s))
	}
	return out
}
