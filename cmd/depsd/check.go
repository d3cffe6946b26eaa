package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/report"
)

// newCheckCmd: exit 0 when every directory was read (warnings allowed), 1
// when a file cannot be built or a directory cannot be read (its result
// carries the error), 2 on usage errors.
func newCheckCmd(a *app) *cobra.Command {
	var (
		registry string
		asJSON   bool
		files    []string
		platform string
	)
	cmd := &cobra.Command{
		Use:   "check [--registry HOST] [--platform OS/ARCH[,...]] [--json] [--file NAME]... DIR...",
		Short: "Print the dependencies declared by local checkouts",
		Long: `check reads the Containerfile (or Dockerfile) and .gitlab-deps of each
directory, as depsd reads them on GitLab, and prints the images and projects
each depends on, with warnings for what it cannot resolve. It needs no
GitLab and no state file. ARGs are expanded as BuildKit does; the platform
ARGs (TARGETARCH, BUILDOS, ...) take the values of --platform, and several
platforms give the union of their dependencies.

With --json every directory has a result; one that cannot be checked has an
"error" with file, line and message.

Exit status: 0 when every directory was read (warnings allowed), 1 when a
file cannot be built (FROM without an image, an unterminated heredoc, ...)
or a directory cannot be read, 2 on a wrong command line.`,
		Example: `  depsd check --registry registry.example.com examples/*
  depsd check . --json
  depsd check --platform linux/amd64,linux/arm64 .`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no directory given")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			platforms, err := deps.ParsePlatforms(platform)
			if err != nil {
				return usagef("--platform: %v", err)
			}
			failed := false
			results := []deps.CheckResult{}
			for _, dir := range args {
				res, err := deps.CheckDir(dir, files, registry, deps.Options{Platforms: platforms})
				if err != nil {
					fmt.Fprintf(a.stderr, "depsd check: %v\n", err)
					failed = true
				}
				results = append(results, res)
			}
			if asJSON {
				if err := writeJSON(a.stdout, struct {
					Results []deps.CheckResult `json:"results"`
				}{results}); err != nil {
					return err
				}
			} else {
				printCheckTable(a.stdout, results)
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&registry, "registry", "", "container registry host of the GitLab instance; images on it name projects")
	fs.BoolVar(&asJSON, "json", false, "print one JSON document")
	fs.StringArrayVar(&files, "file", nil, "Containerfile name to look for, in order (repeatable; default Containerfile, Dockerfile)")
	fs.StringVar(&platform, "platform", deps.DefaultPlatform, "platform(s) to read Containerfiles for, comma-separated: the values of TARGETARCH and the other platform ARGs")
	return cmd
}

// printCheckTable writes the readable form: one table of dependencies per
// directory, then its warnings.
func printCheckTable(w io.Writer, results []deps.CheckResult) {
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		file := r.File
		if file == "" {
			file = "no Containerfile"
		}
		fmt.Fprintf(w, "%s (%s)\n", r.Dir, file)
		if e := r.Error; e != nil {
			where := e.File
			if e.Line > 0 {
				where += fmt.Sprintf(":%d", e.Line)
			}
			if where != "" {
				where += ": "
			}
			fmt.Fprintf(w, "  error: %s%s\n", where, e.Message)
			continue
		}
		if len(r.Dependencies) == 0 {
			fmt.Fprintln(w, "  no dependencies")
		} else {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  LINE\tKIND\tIMAGE\tPROJECT\tPIN")
			for _, d := range r.Dependencies {
				image := d.Image
				if image == "" && d.Kind != deps.KindGitLabDeps {
					image = d.Ref + " (unresolved)"
				}
				project := d.Project
				if project == "" {
					project = "-"
				}
				if image == "" {
					image = "-"
				}
				pin := "-"
				if d.Pinned {
					pin = "pinned " + report.ShortDigest(d.Digest)
					if d.Tag != "" {
						pin += " (tag " + d.Tag + ")"
					}
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", d.Line, d.Kind, image, project, pin)
			}
			tw.Flush()
		}
		for _, wr := range r.Warnings {
			switch {
			case wr.File == "":
				fmt.Fprintf(w, "  warning: %s\n", wr.Message)
			case wr.Line == 0:
				fmt.Fprintf(w, "  warning: %s: %s\n", wr.File, wr.Message)
			default:
				fmt.Fprintf(w, "  warning: %s:%d: %s\n", wr.File, wr.Line, wr.Message)
			}
		}
	}
}
