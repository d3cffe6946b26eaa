package config

import (
	"strings"
	"testing"
)

// The ui and metrics settings: gitlab by default once an OAuth
// application is configured, its secret read from a file or the
// environment and never from depsd.yaml, and serve refusing a sign-in
// that lacks what it needs.
func TestUISettings(t *testing.T) {
	base := "gitlab:\n  url: https://gitlab.example.com\n  token_file: /tok\nscope:\n  groups: [g]\nhooks:\n  secret_file: /hs\n"
	tests := []struct {
		name     string
		file     string
		env      map[string]string
		auth     string
		secret   string
		labels   bool
		wantErr  string
		serveErr string
	}{
		{name: "defaults", auth: "none"},
		{name: "an application makes it gitlab", file: "ui:\n  url: https://depsd.example.com\n  oauth:\n    client_id: abc\n    client_secret_file: /s\n",
			auth: "gitlab", secret: "s3cret"},
		{name: "from the environment", env: map[string]string{"DEPSD_UI_OAUTH_CLIENT_ID": "abc", "DEPSD_UI_OAUTH_CLIENT_SECRET": "envsecret",
			"DEPSD_UI_URL": "https://depsd.example.com", "DEPSD_METRICS_PROJECT_LABELS": "on"}, auth: "gitlab", secret: "envsecret", labels: true},
		{name: "none despite an application", file: "ui:\n  auth: none\n  oauth:\n    client_id: abc\n", auth: "none"},
		{name: "secret in the file", file: "ui:\n  oauth:\n    client_secret: s3cret\n", wantErr: "never read from the file: write client_secret_file"},
		{name: "bad auth", file: "ui:\n  auth: ldap\n", wantErr: `ui.auth "ldap": want gitlab or none`},
		{name: "bad url", file: "ui:\n  url: depsd.example.com/x\n", wantErr: `ui.url "depsd.example.com/x"`},
		{name: "bad labels", file: "metrics:\n  project_labels: maybe\n", wantErr: `metrics.project_labels "maybe": want on or off`},
		{name: "gitlab without what it needs", file: "ui:\n  auth: gitlab\n", auth: "gitlab",
			serveErr: "ui.oauth.client_id is not set"},
		{name: "gitlab without a url", file: "ui:\n  oauth:\n    client_id: abc\n    client_secret_file: /s\n", auth: "gitlab", secret: "s3cret",
			serveErr: "ui.url is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := fakeFS{"depsd.yaml": base + tt.file, "/s": "s3cret\n", "/tok": "glpat-x", "/hs": "hooksecret"}
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
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("the error repeats the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.UIAuth(); got != tt.auth {
				t.Errorf("UIAuth() = %s, want %s", got, tt.auth)
			}
			if cfg.UI.OAuth.ClientSecret != tt.secret || cfg.Metrics.ProjectLabelsOn() != tt.labels {
				t.Errorf("secret set %v, labels %v", cfg.UI.OAuth.ClientSecret != "", cfg.Metrics.ProjectLabelsOn())
			}
			err = cfg.RequireServe()
			if tt.serveErr == "" && err != nil || tt.serveErr != "" && (err == nil || !strings.Contains(err.Error(), tt.serveErr)) {
				t.Errorf("RequireServe: %v, want %q", err, tt.serveErr)
			}
		})
	}
}
