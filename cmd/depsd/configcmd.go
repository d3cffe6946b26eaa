package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "config check",
		Short:   "Check the configuration",
		Long:    "config works on depsd's configuration: depsd.yaml, the environment and flags.",
		Example: "  depsd config check --config /etc/depsd/depsd.yaml",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown subcommand %q: want check", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("want a subcommand: check")
		},
	}
	cmd.AddCommand(newConfigCheckCmd(a))
	return cmd
}

func newConfigCheckCmd(a *app) *cobra.Command {
	var (
		s        settings
		forServe bool
	)
	cmd := &cobra.Command{
		Use:   "check [--serve=false]",
		Short: "Validate depsd.yaml and the environment, print the effective configuration",
		Long: `check reads the configuration as every command does (flags, then the
environment, then depsd.yaml, then defaults), reads the token and secret
files, validates everything including the schedules, and prints the
effective configuration as YAML with the secrets masked. It reports every
problem at once, each with its key (and line, for the file).

By default it also checks what depsd serve needs (GitLab URL and token, a
scope, the webhook secret); --serve=false checks only the values set.
Exit status 1 when something is wrong.`,
		Example: `  depsd config check
  DEPSD_CONFIG=/etc/depsd/depsd.yaml depsd config check
  depsd config check --serve=false --state /tmp/depsd.db`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := s.load(a)
			if err != nil {
				return err
			}
			var problems config.Problems
			if err := cfg.Scheduler.Validate(nil); err != nil {
				problems = append(problems, err)
			}
			if forServe {
				if err := cfg.RequireServe(); err != nil {
					if p, ok := err.(config.Problems); ok {
						problems = append(problems, p...)
					} else {
						problems = append(problems, err)
					}
				}
			}
			out, err := effectiveYAML(cfg)
			if err != nil {
				return err
			}
			fmt.Fprint(a.stdout, "# effective configuration (flags > environment > file > defaults); secrets masked\n", out)
			if len(problems) > 0 {
				return problems
			}
			fmt.Fprintln(a.stdout, "# configuration OK")
			return nil
		},
	}
	s.addCommon(cmd.Flags(), "info")
	s.addGitLab(cmd.Flags())
	s.addMode(cmd.Flags())
	cmd.Flags().StringVar(&s.secretFile, "webhook-secret-file", "", "file holding the X-Gitlab-Token secret, as for serve")
	cmd.Flags().BoolVar(&forServe, "serve", true, "also require what depsd serve needs")
	return cmd
}

// effectiveYAML renders cfg as depsd.yaml would write it, with the token
// and the webhook secrets (never read from the file) shown masked, and
// the password of a postgres:// state URL too.
func effectiveYAML(cfg config.Config) (string, error) {
	// Show the defaults the scheduler applies to what is left empty.
	sc := &cfg.Scheduler
	if sc.CatchUp == "" {
		sc.CatchUp = scheduler.CatchUpOnce
	}
	sc.Rescan = sc.RescanSpec()
	if sc.WatchInterval == 0 {
		sc.WatchInterval = scheduler.DefaultWatchInterval
	}
	cfg.State = store.Redact(cfg.State)
	var doc yaml.Node
	if err := doc.Encode(cfg); err != nil {
		return "", err
	}
	mask := func(v string) string {
		if v == "" {
			return "(not set)"
		}
		return "******** (set)"
	}
	addKey(&doc, "gitlab", "token", mask(cfg.GitLab.Token))
	addKey(&doc, "hooks", "secret", mask(cfg.Hooks.Secret))
	addKey(&doc, "hooks", "signing_token", mask(cfg.Hooks.SigningToken))
	addKey(&doc, "hooks", "signing_token_previous", mask(cfg.Hooks.SigningTokenPrevious))
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return "", err
	}
	return b.String(), enc.Close()
}

// addKey sets key: value in the mapping under section of the top mapping.
func addKey(doc *yaml.Node, section, key, value string) {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == section && doc.Content[i+1].Kind == yaml.MappingNode {
			m := doc.Content[i+1]
			m.Content = append(m.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: key},
				&yaml.Node{Kind: yaml.ScalarNode, Value: value})
			return
		}
	}
}
