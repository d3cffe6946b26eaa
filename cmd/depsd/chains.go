package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/chain"
)

func newChainsCmd(a *app) *cobra.Command {
	var (
		s      settings
		asJSON bool
		only   string
	)
	cmd := &cobra.Command{
		Use:   "chains [--json] [--only STATE] [ID]",
		Short: "Show recent chains, or one chain and its members",
		Long: `chains lists the recent chains from the state file: their state, the
projects they started at, when, and how many members are in which state.
With an ID it shows that chain: why it started and each member with its
pipeline. It reads the state file only, so it works with or without a
running depsd serve.`,
		Example: `  depsd chains
  depsd chains --only running
  depsd chains 42 --json`,
		Args: maxArgs(1, "one chain ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id int64
			if len(args) == 1 {
				var err error
				if id, err = strconv.ParseInt(args[0], 10, 64); err != nil {
					return usagef("ID must be a number, got %q", args[0])
				}
			}
			ctx := cmd.Context()
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			st, err := openStore(ctx, cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
			if err != nil {
				return err
			}
			if len(args) == 1 {
				view, err := engine.Chain(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, view)
				}
				printChain(a.stdout, view)
				return nil
			}
			views, err := engine.Chains(ctx, chain.Filter{State: chain.State(only)})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]any{"chains": views})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tROOTS\tSTARTED\tMEMBERS")
			for _, v := range views {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.ID, v.State, strings.Join(v.Roots, ","), v.Started.Format(time.RFC3339), memberSummary(v))
			}
			return tw.Flush()
		},
	}
	fs := cmd.Flags()
	s.addCommon(fs, "info")
	fs.BoolVar(&asJSON, "json", false, "print JSON, as the HTTP API does")
	fs.StringVar(&only, "only", "", "only chains in this state: running, blocked, finished, expired, merged")
	return cmd
}

// printChain writes one chain, a member per line in dependency order.
func printChain(w io.Writer, v chain.ChainView) {
	fmt.Fprintf(w, "chain %d: %s, roots %s, started %s\n", v.ID, v.State, strings.Join(v.Roots, ", "), v.Started.Format(time.RFC3339))
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  reason: %s %s %s\n", r.Kind, r.Project, r.Detail)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PROJECT\tSTATE\tPIPELINE\tWHY")
	for _, m := range v.Members {
		pipeline := "-"
		if m.PipelineID != 0 {
			pipeline = strconv.FormatInt(m.PipelineID, 10)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.Project, m.State, pipeline, m.Why)
	}
	tw.Flush()
	for _, s := range v.Skipped {
		fmt.Fprintf(w, "  skipped %s: %s\n", s.Project, s.Why)
	}
}

// memberSummary counts members by state: "3 success, 1 running".
func memberSummary(v chain.ChainView) string {
	counts := map[chain.MemberState]int{}
	var order []chain.MemberState
	for _, m := range v.Members {
		if counts[m.State] == 0 {
			order = append(order, m.State)
		}
		counts[m.State]++
	}
	parts := make([]string, 0, len(order))
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	return strings.Join(parts, ", ")
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
