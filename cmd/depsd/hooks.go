package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"gitlab.com/depsd/depsd/gitlab"
)

// runHooks implements `depsd hooks sync`: every project of the scope gets
// exactly one depsd hook. The projects come from the last scan.
func runHooks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "sync" {
		fmt.Fprintln(stderr, "usage: depsd hooks sync [--url PUBLIC_URL] [--dry-run] [--rotate-token]")
		return exitUsage
	}
	c := newCommand("hooks sync", "hooks sync [--url PUBLIC_URL] [--dry-run] [--rotate-token]", stderr, true)
	hookURL := c.fs.String("url", "", "public URL of depsd's webhook endpoint, e.g. https://depsd.example.com/hooks/gitlab (default hooks.url, $DEPSD_HOOK_URL)")
	dryRun := c.fs.Bool("dry-run", false, "say what would change, change nothing")
	rotate := c.fs.Bool("rotate-token", false, "set the secret token on every hook (after changing the secret: GitLab never shows a hook's token, so drift cannot be seen)")
	if code, ok := c.parse(args[1:]); !ok {
		return code
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, "hooks sync", err)
	}
	if *hookURL != "" {
		cfg.Hooks.URL = *hookURL
		if err := cfg.Validate(); err != nil {
			return fail(stderr, "hooks sync", err)
		}
	}
	switch {
	case cfg.Hooks.URL == "":
		return fail(stderr, "hooks sync", errors.New("no hook URL: pass --url or set hooks.url / DEPSD_HOOK_URL"))
	case cfg.Hooks.Secret == "":
		return fail(stderr, "hooks sync", errors.New("no webhook secret: set DEPSD_WEBHOOK_SECRET, DEPSD_WEBHOOK_SECRET_FILE or hooks.secret_file"))
	}
	log := c.logger(stderr)
	gl, err := newScopedGitLab(cfg, log)
	if err != nil {
		return fail(stderr, "hooks sync", err)
	}
	projects, err := gl.ListProjects(ctx, scope(cfg))
	if err != nil {
		return fail(stderr, "hooks sync", explainGitLabError(err, cfg.GitLab.URL))
	}
	rep, err := gl.SyncHooks(ctx, projects, gitlab.HookSpec{URL: cfg.Hooks.URL, SecretToken: cfg.Hooks.Secret, RotateToken: *rotate}, *dryRun)
	printHookReport(stdout, rep)
	if err != nil {
		return fail(stderr, "hooks sync", explainGitLabError(err, cfg.GitLab.URL))
	}
	return exitOK
}

func printHookReport(w io.Writer, rep gitlab.HookReport) {
	verb := ""
	if rep.DryRun {
		verb = "would be "
	}
	for _, ch := range rep.Changes {
		if ch.Action == gitlab.HookUnchanged {
			continue
		}
		fmt.Fprintf(w, "%s: %s%s", ch.Project, verb, ch.Action)
		if len(ch.Reasons) > 0 {
			fmt.Fprintf(w, " (%v)", ch.Reasons)
		}
		fmt.Fprintln(w)
	}
	if rep.Changed() == 0 {
		fmt.Fprintf(w, "all %d projects have their depsd hook: nothing to change\n", len(rep.Changes))
		return
	}
	fmt.Fprintf(w, "%d projects, %d unchanged\n", len(rep.Changes), rep.Count(gitlab.HookUnchanged))
}
