package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/chain"
)

func newAuditCmd(a *app) *cobra.Command {
	var (
		s       settings
		asJSON  bool
		chainID int64
		limit   int
	)
	cmd := &cobra.Command{
		Use:   "audit [--json] [--chain ID] [--limit N]",
		Short: "Show what people did from the dashboard and the API",
		Long: `audit prints the audit log, newest first: every rebuild, retry, skip and
cancel a signed-in person asked for from the dashboard or the API, and
every one refused (a role below Developer, a missing CSRF token, a member
in another state), with who, what, on which chain and member, the reason
given, the outcome, when and from which address. It reads the state file
only, so it works with or without a running depsd serve.`,
		Example: `  depsd audit
  depsd audit --chain 42
  depsd audit --json --limit 1000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 100000 {
				return usagef("--limit %d: want 1 to 100000", limit)
			}
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
			engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
			if err != nil {
				return err
			}
			log, err := engine.Audit(ctx, chain.AuditFilter{ChainID: chainID, Limit: limit})
			if err != nil {
				return err
			}
			if asJSON {
				if log == nil {
					log = []chain.AuditEntry{}
				}
				return writeJSON(a.stdout, map[string]any{"audit": log})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WHEN\tWHO\tACTION\tCHAIN\tTARGET\tREASON\tOUTCOME\tFROM")
			for _, e := range log {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339), e.Actor, e.Action, e.ChainID,
					dash(e.Target), dash(e.Reason), e.Outcome, dash(e.Address))
			}
			return tw.Flush()
		},
	}
	fs := cmd.Flags()
	s.addCommon(fs, "info")
	fs.BoolVar(&asJSON, "json", false, "print JSON, as GET /api/v1/audit does")
	fs.Int64Var(&chainID, "chain", 0, "only the entries about this chain")
	fs.IntVar(&limit, "limit", 100, "at most this many entries, newest first")
	return cmd
}

// dash is s, or "-" for nothing.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
