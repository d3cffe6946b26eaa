package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"gitlab.com/depsd/depsd/deps"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// runCheck implements `depsd check`: exit 0 when every directory was
// read (warnings allowed), 1 when a file cannot be built or a directory
// cannot be read (its result carries the error), 2 on usage errors.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	registry := fs.String("registry", "", "container registry host of the GitLab instance; images on it name projects")
	asJSON := fs.Bool("json", false, "print one JSON document")
	var files stringList
	fs.Var(&files, "file", "Containerfile name to look for, in order (repeatable; default Containerfile, Dockerfile)")
	platform := fs.String("platform", deps.DefaultPlatform, "platform(s) to read Containerfiles for, comma-separated: the values of TARGETARCH and the other platform ARGs; several give the union")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: depsd check [--registry HOST] [--platform OS/ARCH[,...]] [--json] [--file NAME]... DIR...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "depsd check: no directory given")
		fs.Usage()
		return exitUsage
	}

	platforms, err := deps.ParsePlatforms(*platform)
	if err != nil {
		fmt.Fprintf(stderr, "depsd check: --platform: %v\n", err)
		return exitUsage
	}

	code := exitOK
	results := []deps.CheckResult{}
	for _, dir := range fs.Args() {
		res, err := deps.CheckDir(dir, files, *registry, deps.Options{Platforms: platforms})
		if err != nil {
			fmt.Fprintf(stderr, "depsd check: %v\n", err)
			code = exitFail
		}
		results = append(results, res)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Results []deps.CheckResult `json:"results"`
		}{results}); err != nil {
			fmt.Fprintf(stderr, "depsd check: %v\n", err)
			return exitFail
		}
		return code
	}
	printCheckTable(stdout, results)
	return code
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
			fmt.Fprintln(tw, "  LINE\tKIND\tIMAGE\tPROJECT")
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
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", d.Line, d.Kind, image, project)
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
