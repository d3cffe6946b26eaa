package config

import (
	"encoding/base64"
	"strings"
	"testing"
)

func signingToken(b byte, n int) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), n)))
}

// The signing settings: from files and the environment, checked in the
// user's terms, never repeating a token in an error.
func TestSigningSettings(t *testing.T) {
	cur, prev := signingToken('a', 32), signingToken('b', 32)
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		files   fakeFS
		want    []string // SigningTokens()
		signing string
		mode    string
		wantErr string
	}{
		{name: "defaults", want: nil, signing: "auto", mode: "project"},
		{name: "from files, rotation", file: "hooks:\n  signing: required\n  mode: group\n  signing_token_file: /t\n  signing_token_previous_file: /p\nscope:\n  groups: [g]\n",
			files: fakeFS{"/t": cur + "\n", "/p": prev}, want: []string{cur, prev}, signing: "required", mode: "group"},
		{name: "from the environment", env: map[string]string{"DEPSD_WEBHOOK_SIGNING_TOKEN": cur, "DEPSD_WEBHOOK_SIGNING": "off", "DEPSD_HOOKS_MODE": "group"},
			want: []string{cur}, signing: "off", mode: "group"},
		{name: "environment wins over the file", file: "hooks:\n  signing_token_file: /t\n", files: fakeFS{"/t": prev},
			env: map[string]string{"DEPSD_WEBHOOK_SIGNING_TOKEN": cur}, want: []string{cur}, signing: "auto", mode: "project"},
		{name: "token in the file itself", file: "hooks:\n  signing_token: " + cur + "\n", wantErr: "never read from the file: write signing_token_file"},
		{name: "the issue's spelling", file: "webhook:\n  signing: auto\n", wantErr: "settings are under hooks:"},
		{name: "bad mode", file: "hooks:\n  signing: maybe\n", wantErr: `hooks.signing "maybe": want auto, required, off`},
		{name: "bad hooks mode", file: "hooks:\n  mode: instance\n", wantErr: `hooks.mode "instance": want project or group`},
		{name: "no prefix", env: map[string]string{"DEPSD_WEBHOOK_SIGNING_TOKEN": strings.TrimPrefix(cur, "whsec_")}, wantErr: `DEPSD_WEBHOOK_SIGNING_TOKEN): a signing token starts with "whsec_"`},
		{name: "short key", env: map[string]string{"DEPSD_WEBHOOK_SIGNING_TOKEN": signingToken('a', 16)}, wantErr: "16 bytes; want at least 24"},
		{name: "24-byte key: Standard Webhooks accepts it, GitLab does not", env: map[string]string{"DEPSD_WEBHOOK_SIGNING_TOKEN": signingToken('a', 24)}, wantErr: "24 bytes; GitLab accepts only 32"},
		{name: "short key in a file", file: "hooks:\n  signing_token_previous_file: /p\n  signing_token_file: /t\n", files: fakeFS{"/t": cur, "/p": signingToken('c', 8)},
			wantErr: "hooks.signing_token_previous_file or DEPSD_WEBHOOK_SIGNING_TOKEN_PREVIOUS): the key after \"whsec_\" is 8 bytes"},
		{name: "previous without a current one", env: map[string]string{"DEPSD_WEBHOOK_SIGNING_TOKEN_PREVIOUS": prev}, wantErr: "previous token only verifies during a rotation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := fakeFS{}
			if tt.file != "" {
				files["depsd.yaml"] = tt.file
			}
			for k, v := range tt.files {
				files[k] = v
			}
			cfg, err := Load(Source{Env: env(tt.env), ReadFile: files.read})
			if err == nil {
				err = cfg.ResolveSecrets(files.read)
			}
			if err == nil {
				err = cfg.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				for _, tok := range []string{cur, prev, signingToken('a', 16), signingToken('c', 8)} {
					if strings.Contains(err.Error(), strings.TrimPrefix(tok, "whsec_")) {
						t.Fatalf("the error repeats a token: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Hooks.SigningTokens(); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("tokens %d, want %d", len(got), len(tt.want))
			}
			if cfg.Hooks.Signing != tt.signing || cfg.Hooks.Mode != tt.mode {
				t.Errorf("signing %q mode %q", cfg.Hooks.Signing, cfg.Hooks.Mode)
			}
		})
	}
}
