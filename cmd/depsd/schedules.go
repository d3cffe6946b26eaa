package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"gitlab.com/depsd/depsd/daemon"
)

// runSchedules implements `depsd schedules`: every schedule with its next
// and last fire and outcome, read from the state file.
func runSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("schedules", "schedules [--json]", stderr, false)
	asJSON := c.fs.Bool("json", false, "print JSON")
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, "schedules", err)
	}
	if err := cfg.Scheduler.Validate(nil); err != nil {
		return fail(stderr, "schedules", err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return fail(stderr, "schedules", err)
	}
	defer st.Close()
	entries, err := daemon.ListSchedules(ctx, cfg.Scheduler, st, nil)
	if err != nil {
		return fail(stderr, "schedules", err)
	}
	if *asJSON {
		return printJSON(stdout, stderr, map[string]any{"schedules": entries})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTARGET\tSCHEDULE\tNEXT\tLAST\tOUTCOME")
	for _, e := range entries {
		spec := e.Spec
		if e.Timezone != "" {
			spec += " (" + e.Timezone + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Kind, e.Target, spec, when(e.Next), when(e.LastFire), orDash(e.LastOutcome))
	}
	tw.Flush()
	return exitOK
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
