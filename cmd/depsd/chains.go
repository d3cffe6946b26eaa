package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// runChains implements `depsd chains [--json] [ID]`: the recent chains, or
// one chain with its members.
func runChains(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("chains", "chains [--json] [--only STATE] [ID]", stderr, false)
	asJSON := c.fs.Bool("json", false, "print JSON, as the HTTP API does")
	only := c.fs.String("only", "", "only chains in this state: running, blocked, finished, expired, merged")
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, "chains", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return fail(stderr, "chains", err)
	}
	defer st.Close()
	engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
	if err != nil {
		return fail(stderr, "chains", err)
	}
	if c.fs.NArg() == 1 {
		id, err := strconv.ParseInt(c.fs.Arg(0), 10, 64)
		if err != nil {
			fmt.Fprintln(stderr, "depsd chains: ID must be a number")
			return exitUsage
		}
		view, err := engine.Chain(ctx, id)
		if err != nil {
			return fail(stderr, "chains", err)
		}
		if *asJSON {
			return printJSON(stdout, stderr, view)
		}
		printChain(stdout, view)
		return exitOK
	}
	views, err := engine.Chains(ctx, chain.Filter{State: chain.State(*only)})
	if err != nil {
		return fail(stderr, "chains", err)
	}
	if *asJSON {
		return printJSON(stdout, stderr, map[string]any{"chains": views})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tROOTS\tSTARTED\tMEMBERS")
	for _, v := range views {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.ID, v.State, strings.Join(v.Roots, ","), v.Started.Format(time.RFC3339), memberSummary(v))
	}
	tw.Flush()
	return exitOK
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

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(stderr, "chains", err)
	}
	return exitOK
}
