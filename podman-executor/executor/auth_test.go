package executor

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// credentialHelper puts docker-credential-podexec-test on PATH: a
// credential helper speaking docker's protocol (server URL on stdin, JSON
// on stdout), as docker-credential-pass or -ecr-login do.
func credentialHelper(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread url\n" +
		`printf '{"ServerURL":"%s","Username":"helper-user-%s","Secret":"helper-secret"}\n' "$url" "$url"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-podexec-test"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestMalformedDockerAuthConfig: a job whose DOCKER_AUTH_CONFIG is not
// JSON fails with a build failure saying so, quoting none of it.
func TestMalformedDockerAuthConfig(t *testing.T) {
	secret := "s3cr3t-password"
	for _, raw := range []string{`{"auths":{"r.example.com":{"auth":"` + secret, `["` + secret + `"]`} {
		j := Job{Vars: map[string]string{"DOCKER_AUTH_CONFIG": raw}}
		_, _, err := credentials("r.example.com/x", j, Config{}, t.TempDir())
		var je *JobError
		if !errors.As(err, &je) || !strings.Contains(err.Error(), "DOCKER_AUTH_CONFIG") {
			t.Fatalf("err = %v, want a JobError about DOCKER_AUTH_CONFIG", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error quotes the variable: %v", err)
		}
	}
	j := Job{Driver: map[string]string{"DOCKER_AUTH_CONFIG": "{"}}
	if _, _, err := credentials("r.example.com/x", j, Config{}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "runner DOCKER_AUTH_CONFIG: not valid JSON") {
		t.Errorf("runner's malformed DOCKER_AUTH_CONFIG: err = %v", err)
	}
}

func TestCredentials(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("dockeruser:dockerpass"))
	dockerCfg := `{"auths":{"https://registry.example.com/v1/":{"auth":"` + b64 + `"}}}`
	enc := func(up string) string { return base64.StdEncoding.EncodeToString([]byte(up)) }
	perRepo := `{"auths":{"registry.example.com/team/app":{"auth":"` + enc("team-user:team-pass") + `"},"registry.example.com":{"auth":"` + enc("reg-user:reg-pass") + `"}}}`
	dockerHub := `{"auths":{"https://index.docker.io/v1/":{"auth":"` + enc("hubuser:hubpass") + `"}}}`
	credentialHelper(t)
	tests := []struct {
		name       string
		image      string
		vars       map[string]string
		driver     map[string]string
		creds      []ResponseCredential
		authFile   string
		want       container.Auth
		wantSource string
	}{
		{name: "anonymous", image: "alpine", want: container.Auth{}},
		{name: "job DOCKER_AUTH_CONFIG", image: "registry.example.com/x", vars: map[string]string{"DOCKER_AUTH_CONFIG": dockerCfg},
			want: container.Auth{Username: "dockeruser", Password: "dockerpass"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "runner DOCKER_AUTH_CONFIG", image: "registry.example.com/x", driver: map[string]string{"DOCKER_AUTH_CONFIG": dockerCfg},
			want: container.Auth{Username: "dockeruser", Password: "dockerpass"}, wantSource: "runner DOCKER_AUTH_CONFIG"},
		{name: "DOCKER_AUTH_CONFIG for another registry falls through to auth file", image: "other.example.com/x",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": dockerCfg}, authFile: "/a.json", want: container.Auth{AuthFile: "/a.json"}, wantSource: "auth file /a.json"},
		{name: "job payload credentials", image: "registry.gitlab.example/g/p:1",
			creds: []ResponseCredential{{Type: "registry", URL: "registry.gitlab.example", Username: "gitlab-ci-token", Password: "jobtoken"}},
			want:  container.Auth{Username: "gitlab-ci-token", Password: "jobtoken"}, wantSource: "job credentials for registry.gitlab.example"},
		{name: "CI_REGISTRY_USER", image: "registry.gitlab.example:5050/g/p",
			vars: map[string]string{"CI_REGISTRY": "registry.gitlab.example:5050", "CI_REGISTRY_USER": "u", "CI_REGISTRY_PASSWORD": "p"},
			want: container.Auth{Username: "u", Password: "p"}, wantSource: "CI_REGISTRY_USER"},
		{name: "per-repository key wins over the registry's", image: "registry.example.com/team/app:1",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": perRepo},
			want: container.Auth{Username: "team-user", Password: "team-pass"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "registry key for other repositories", image: "registry.example.com/other/app:1",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": perRepo},
			want: container.Auth{Username: "reg-user", Password: "reg-pass"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "identitytoken (as docker login writes it)", image: "registry.example.com/x",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": `{"auths":{"registry.example.com":{"auth":"` + enc("someone:") + `","identitytoken":"refresh-tok"}}}`},
			want: container.Auth{IdentityToken: "refresh-tok", Registry: "registry.example.com"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "credHelpers", image: "registry.example.com/x",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": `{"credHelpers":{"registry.example.com":"podexec-test"}}`},
			want: container.Auth{Username: "helper-user-registry.example.com", Password: "helper-secret"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "credsStore for registries without an entry", image: "registry.example.com/x",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": `{"auths":{"other.example.com":{"auth":"dTpw"}},"credsStore":"podexec-test"}`},
			want: container.Auth{Username: "helper-user-registry.example.com", Password: "helper-secret"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "Docker Hub's legacy key", image: "alpine:3",
			vars: map[string]string{"DOCKER_AUTH_CONFIG": dockerHub},
			want: container.Auth{Username: "hubuser", Password: "hubpass"}, wantSource: "job DOCKER_AUTH_CONFIG"},
		{name: "CI_REGISTRY_USER not sent elsewhere", image: "docker.io/library/alpine",
			vars: map[string]string{"CI_REGISTRY": "registry.gitlab.example", "CI_REGISTRY_USER": "u", "CI_REGISTRY_PASSWORD": "p"},
			want: container.Auth{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Job{Vars: tt.vars, Driver: tt.driver, Response: JobResponse{Credentials: tt.creds}}
			got, source, err := credentials(tt.image, j, Config{AuthFile: tt.authFile}, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || source != tt.wantSource {
				t.Errorf("got %+v from %q, want %+v from %q", got, source, tt.want, tt.wantSource)
			}
			for _, secret := range []string{"dockerpass", "jobtoken", got.Password} {
				if secret != "" && strings.Contains(source, secret) {
					t.Errorf("source %q leaks a secret", source)
				}
			}
		})
	}
}
