package executor

import (
	"encoding/base64"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

func TestCredentials(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("dockeruser:dockerpass"))
	dockerCfg := `{"auths":{"https://registry.example.com/v1/":{"auth":"` + b64 + `"}}}`
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
		{name: "CI_REGISTRY_USER not sent elsewhere", image: "docker.io/library/alpine",
			vars: map[string]string{"CI_REGISTRY": "registry.gitlab.example", "CI_REGISTRY_USER": "u", "CI_REGISTRY_PASSWORD": "p"},
			want: container.Auth{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Job{Vars: tt.vars, Driver: tt.driver, Response: JobResponse{Credentials: tt.creds}}
			got, source := credentials(tt.image, j, Config{AuthFile: tt.authFile})
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
