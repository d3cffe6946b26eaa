package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/chain"
)

func newChainsCmd(a *app) *cobra.Command {
	var (
		s        settings
		asJSON   bool
		only     string
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "chains [--json] [--only STATE] [ID]",
		Short: "Show recent chains, or one chain and its members",
		Long: `chains lists the recent chains from the state file: their state, the
projects they started at, when, and how many members are in which state.
With an ID it shows that chain: why it started and each member in build
order (wave by wave) with its pipeline's URL; --watch then follows it until
it ends. It reads the state file only, so it works with or without a
running depsd serve.`,
		Example: `  depsd chains
  depsd chains --only running
  depsd chains 42 --json
  depsd chains 42 --watch`,
		Args: maxArgs(1, "one chain ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id int64
			if watch && len(args) == 0 {
				return usagef("--watch follows one chain: give its ID")
			}
			if interval <= 0 {
				return usagef("--interval %s: want a positive duration, e.g. 2s", interval)
			}
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
			st, err := openExisting(ctx, cfg)
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
				if watch {
					tick := time.NewTicker(interval)
					defer tick.Stop()
					last, err := watchChain(ctx, a.stdout, func(ctx context.Context) (chain.ChainView, error) { return engine.Chain(ctx, id) }, tick.C, time.Now)
					if err != nil {
						return err
					}
					return chainOutcome(last)
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
	fs.BoolVar(&watch, "watch", false, "with an ID: follow the chain, printing each member's change, until it ends (exit 1 if it did not finish cleanly)")
	fs.DurationVar(&interval, "interval", 2*time.Second, "how often --watch reads the state file")
	enumVar(fs, &only, "only", "", chainStateNames(), "only chains in this state: "+strings.Join(chainStateNames(), ", "))
	return cmd
}

// chainStateNames are the values of --only.
func chainStateNames() []string {
	var names []string
	for _, s := range chain.States() {
		names = append(names, string(s))
	}
	return names
}

// printChain writes one chain, a member per line in build order (wave by
// wave, as the rebuild goes), each with its pipeline's URL.
func printChain(w io.Writer, v chain.ChainView) {
	fmt.Fprintf(w, "chain %d: %s (%s mode), roots %s, started %s\n", v.ID, v.State, v.Mode, strings.Join(v.Roots, ", "), v.Started.Format(time.RFC3339))
	if v.MergedInto != 0 {
		fmt.Fprintf(w, "  merged into chain %d\n", v.MergedInto)
	}
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  reason: %s\n", strings.Join(nonEmpty(string(r.Kind), r.Project, r.Detail), " "))
	}
	// The verdict on each member's images, once some member has one.
	verified := slices.ContainsFunc(v.Members, func(m chain.MemberView) bool { return m.Verified != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if verified {
		fmt.Fprintln(tw, "  WAVE\tPROJECT\tSTATE\tIMAGES\tPIPELINE\tWHY")
	} else {
		fmt.Fprintln(tw, "  WAVE\tPROJECT\tSTATE\tPIPELINE\tWHY")
	}
	for _, m := range buildOrder(v.Members) {
		pipeline := "-"
		switch {
		case m.PipelineURL != "":
			pipeline = m.PipelineURL
		case m.PipelineID != 0:
			pipeline = strconv.FormatInt(m.PipelineID, 10)
		case m.MergeRequest != "":
			pipeline = m.MergeRequest // waiting for its pin merge request
		}
		if !verified {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", m.wave, m.Project, m.State, pipeline, m.Why)
			continue
		}
		why := m.Why
		if why == "" && m.Verified != "" && m.Verified != chain.ImageFresh {
			why = m.VerifyDetail // an unknown verdict, or a stale one reported only
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", m.wave, m.Project, m.State, orDash(string(m.Verified)), pipeline, why)
	}
	tw.Flush()
	for _, s := range v.Skipped {
		fmt.Fprintf(w, "  skipped %s: %s\n", s.Project, s.Why)
	}
	if len(v.Writes) > 0 {
		fmt.Fprintln(w, "written to GitLab:")
		for _, wr := range v.Writes {
			fmt.Fprintf(w, "  %s  %s  %s\n", wr.At.Format(time.RFC3339), wr.Project, strings.Join(nonEmpty(wr.Detail, wr.URL), " "))
		}
	}
}

// orderedMember is a member with its wave: 0 for the chain's roots, else
// one more than its latest upstream in the chain.
type orderedMember struct {
	chain.MemberView
	wave int
}

// buildOrder sorts members by wave, then path: the order a rebuild builds
// them in.
func buildOrder(members []chain.MemberView) []orderedMember {
	byName := make(map[string]chain.MemberView, len(members))
	for _, m := range members {
		byName[m.Project] = m
	}
	waves := make(map[string]int, len(members))
	var waveOf func(p string, seen map[string]bool) int
	waveOf = func(p string, seen map[string]bool) int {
		if w, ok := waves[p]; ok {
			return w
		}
		if seen[p] { // a cycle cannot be in a chain; do not loop if it were
			return 0
		}
		seen[p] = true
		w := 0
		for _, u := range byName[p].Upstreams {
			if _, in := byName[u]; in {
				w = max(w, waveOf(u, seen)+1)
			}
		}
		waves[p] = w
		return w
	}
	out := make([]orderedMember, 0, len(members))
	for _, m := range members {
		out = append(out, orderedMember{m, waveOf(m.Project, map[string]bool{})})
	}
	slices.SortStableFunc(out, func(a, b orderedMember) int {
		return cmp.Or(cmp.Compare(a.wave, b.wave), cmp.Compare(a.Project, b.Project))
	})
	return out
}

func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

// watchChain prints the chain, then each change of a member's state as it
// happens, until the chain is no longer active (or ctx ends). fetch reads
// the chain; tick paces the polls. It returns the last view.
func watchChain(ctx context.Context, w io.Writer, fetch func(context.Context) (chain.ChainView, error), tick <-chan time.Time, now func() time.Time) (chain.ChainView, error) {
	v, err := fetch(ctx)
	if err != nil {
		return v, err
	}
	printChain(w, v)
	seen := map[string]chain.MemberView{}
	for _, m := range v.Members {
		seen[m.Project] = m
	}
	for v.State.Active() {
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-tick:
		}
		next, err := fetch(ctx)
		if err != nil {
			return v, err
		}
		for _, m := range buildOrder(next.Members) {
			old, ok := seen[m.Project]
			if ok && old.State == m.State && old.PipelineID == m.PipelineID {
				continue
			}
			line := fmt.Sprintf("%s  %s: %s", now().Format("15:04:05"), m.Project, m.State)
			if m.PipelineURL != "" {
				line += " " + m.PipelineURL
			}
			if m.Why != "" && m.State.Broken() {
				line += " (" + m.Why + ")"
			}
			fmt.Fprintln(w, line)
			seen[m.Project] = m.MemberView
		}
		if next.State != v.State {
			fmt.Fprintf(w, "%s  chain %d: %s\n", now().Format("15:04:05"), next.ID, next.State)
		}
		v = next
	}
	return v, nil
}

// chainOutcome is nil for a chain that finished with every member built,
// an error saying what went wrong otherwise.
func chainOutcome(v chain.ChainView) error {
	if v.State == chain.Merged {
		return fmt.Errorf("chain %d was merged into chain %d: follow that one", v.ID, v.MergedInto)
	}
	var broken []string
	for _, m := range v.Members {
		if m.State.Broken() {
			broken = append(broken, m.Project+" "+string(m.State))
		}
	}
	if v.State != chain.Finished || len(broken) > 0 {
		return fmt.Errorf("chain %d ended %s: %s", v.ID, v.State, orDash(strings.Join(broken, ", ")))
	}
	return nil
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
