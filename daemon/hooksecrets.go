package daemon

import (
	"context"
	"time"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// installedSecrets names what hooks sync installs on every hook under
// cfg (webhook.SecretsInstalled): it changes with the secret and the
// mode.
func installedSecrets(cfg config.Config) string {
	return webhook.SecretsInstalled(cfg.Hooks.Secret, cfg.Hooks.SecretMode)
}

// HookSecrets sets spec's secrets as hooks.secret_mode says (per-project:
// each project hook and each group hook its own, webhook.ProjectSecret and
// GroupSecret; shared: hooks.secret on every hook), and marks them
// pending unless the state records that a sync installed exactly these on
// every hook: GitLab never shows a hook's secret, so hooks installed
// before (with the shared secret, or another one) are edited.
// `depsd serve` and `depsd hooks sync` call it.
func HookSecrets(ctx context.Context, cfg config.Config, st *store.Store, spec *gitlab.HookSpec) error {
	spec.SecretToken = cfg.Hooks.Secret
	if cfg.Hooks.SecretMode != webhook.SecretShared {
		master := cfg.Hooks.Secret
		spec.ProjectSecret = func(id int64) string { return webhook.ProjectSecret(master, id) }
		spec.GroupSecret = func(group string) string { return webhook.GroupSecret(master, group) }
	}
	got, err := st.HookSecretsInstalled(ctx)
	if err != nil {
		return err
	}
	spec.SecretsPending = got != installedSecrets(cfg)
	return nil
}

// HookSecretsSynced records, after a hooks sync (not a dry run) that
// ended without an error, that every hook in scope carries the secrets
// HookSecrets gave spec: the shared secret is then no longer accepted in
// per-project mode. A sync that failed for a project records nothing, so
// the next one edits every hook again.
func HookSecretsSynced(ctx context.Context, cfg config.Config, st *store.Store, now time.Time) error {
	return st.SaveHookSecretsInstalled(ctx, installedSecrets(cfg), now)
}

// sharedSecretAccepted reports, from what the state records, whether
// hooks may still carry the shared secret in per-project mode.
func sharedSecretAccepted(ctx context.Context, cfg config.Config, st *store.Store) (bool, error) {
	got, err := st.HookSecretsInstalled(ctx)
	if err != nil {
		return true, err
	}
	return got != installedSecrets(cfg), nil
}
