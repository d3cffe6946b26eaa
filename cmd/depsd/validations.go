package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/chain"
)

func newValidationsCmd(a *app) *cobra.Command {
	var (
		s      settings
		asJSON bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "validations [--json] [ID | PROJECT!IID]",
		Short: "Show the merge requests validated before the merge, or one validation and its dependents",
		Long: `validations lists the merge requests of upstreams that premerge covers
(docs/validation.md), the most recently changed first: the merge request,
its state, the result of its newest validation (what the commit status
depsd/dependents says) and its summary. With an ID (a validation's, as in
the link on the merge request) or PROJECT!IID it shows that validation:
the candidate it built on, each dependent in build order with its
pipeline, result and the image it built, and the tags to delete once the
merge request ends. It reads the state file only, so it works with or
without a running depsd serve.`,
		Example: `  depsd validations
  depsd validations 42
  depsd validations infra/base!7 --json`,
		Args: maxArgs(1, "one validation ID or PROJECT!IID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				id      int64
				project string
				iid     int64
			)
			if limit < 1 {
				return usagef("--limit %d: want a positive number", limit)
			}
			if len(args) == 1 {
				var err error
				if p, n, ok := strings.Cut(args[0], "!"); ok {
					if iid, err = strconv.ParseInt(n, 10, 64); err != nil || p == "" || iid < 1 {
						return usagef("want PROJECT!IID (e.g. infra/base!7), got %q", args[0])
					}
					project = p
				} else if id, err = strconv.ParseInt(args[0], 10, 64); err != nil {
					return usagef("ID must be a number or PROJECT!IID, got %q", args[0])
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
				var view chain.ValidationView
				if project != "" {
					view, err = engine.MergeRequestValidation(ctx, project, iid)
				} else {
					view, err = engine.Validation(ctx, id)
				}
				if errors.Is(err, chain.ErrNotFound) {
					return fmt.Errorf("%w (depsd validations lists the merge requests validated)", err)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, view)
				}
				printValidation(a.stdout, view)
				return nil
			}
			views, err := engine.Validations(ctx, chain.MRFilter{Limit: limit})
			if err != nil {
				return err
			}
			if views == nil {
				views = []chain.ValidationView{}
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]any{"validations": views})
			}
			printValidations(a.stdout, views)
			return nil
		},
	}
	fs := cmd.Flags()
	s.addCommon(fs, "info")
	fs.BoolVar(&asJSON, "json", false, "print JSON, as the HTTP API does")
	fs.IntVar(&limit, "limit", 100, "list at most this many merge requests")
	return cmd
}

// printValidations is the list: one merge request a line with its newest
// validation.
func printValidations(w io.Writer, views []chain.ValidationView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMERGE REQUEST\tMR STATE\tRESULT\tUPDATED\tSUMMARY")
	for _, v := range views {
		id := "-"
		if v.Chain != nil {
			id = strconv.FormatInt(v.Chain.ID, 10)
		}
		summary := v.Summary
		if summary == "" {
			summary = v.Error
		}
		fmt.Fprintf(tw, "%s\t%s!%d\t%s\t%s\t%s\t%s\n", id, v.Project, v.IID, v.State, orDash(string(v.Result)),
			v.Updated.Format(time.RFC3339), orDash(summary))
	}
	tw.Flush()
}

// printValidation is one validation: its merge request, the candidate,
// each dependent in build order with its pipeline, result and the image
// it built, and the tags to delete.
func printValidation(w io.Writer, v chain.ValidationView) {
	fmt.Fprintf(w, "merge request %s!%d", v.Project, v.IID)
	if v.Title != "" {
		fmt.Fprintf(w, " %q", v.Title)
	}
	fmt.Fprintf(w, ": %s", v.State)
	if v.URL != "" {
		fmt.Fprintf(w, " %s", v.URL)
	}
	fmt.Fprintln(w)
	if v.Chain == nil {
		fmt.Fprintf(w, "  no validation yet: %s\n", orDash(v.Error))
		return
	}
	c := *v.Chain
	fmt.Fprintf(w, "validation %d: %s, depsd/dependents %s: %s\n", c.ID, c.State, orDash(string(v.Result)), orDash(v.Summary))
	if val := c.Validation; val != nil {
		pipeline := strconv.FormatInt(val.PipelineID, 10)
		if val.PipelineURL != "" {
			pipeline = val.PipelineURL
		}
		fmt.Fprintf(w, "  commit %s, candidate %s@%s (pipeline %s), depth %s\n", shortSHA(val.SHA), val.Candidate, val.Digest, pipeline, val.Depth)
		if val.Canceled != "" {
			fmt.Fprintf(w, "  called off: %s\n", val.Canceled)
		}
	}
	if len(v.Chains) > 1 {
		ids := make([]string, len(v.Chains))
		for i, id := range v.Chains {
			ids[i] = strconv.FormatInt(id, 10)
		}
		fmt.Fprintf(w, "  validations of this merge request: %s\n", strings.Join(ids, ", "))
	}
	if v.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", v.Error)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEVEL\tDEPENDENT\tSTATE\tPIPELINE\tBUILT\tWHY")
	for _, m := range buildOrder(c.Members) {
		if m.wave == 0 {
			continue // the upstream: its candidate is above
		}
		pipeline := "-"
		switch {
		case m.PipelineURL != "":
			pipeline = m.PipelineURL
		case m.PipelineID != 0:
			pipeline = strconv.FormatInt(m.PipelineID, 10)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", m.wave, m.Project, m.State, pipeline, orDash(m.Built), m.Why)
	}
	tw.Flush()
	for _, tc := range v.Cleanup {
		result := tc.Result
		if result == "" && !tc.Done {
			result = "to delete when the merge request ends"
		}
		fmt.Fprintf(w, "  tag %s: %s\n", tc.Image, result)
	}
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
