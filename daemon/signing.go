package daemon

import (
	"context"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// SigningTokens are the webhook signing tokens of this configuration, the
// one hooks sync installs first: none with hooks.signing: off; else the
// configured ones; else the token kept in the state, generated there once
// ("whsec_" + base64 of 32 random bytes), so that every replica, restart
// and `depsd hooks sync` run uses the same.
func SigningTokens(ctx context.Context, cfg config.Config, st *store.Store) ([]string, error) {
	if cfg.Hooks.Signing == webhook.SigningOff {
		return nil, nil
	}
	if t := cfg.Hooks.SigningTokens(); len(t) > 0 {
		return t, nil
	}
	t, err := st.SigningToken(ctx, webhook.NewSigningToken)
	if err != nil {
		return nil, err
	}
	return []string{t}, nil
}

// firstToken is the token hooks sync installs, or "" for none.
func firstToken(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	return tokens[0]
}
