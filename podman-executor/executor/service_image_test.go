package executor

import (
	"context"
	"strings"
	"testing"
)

// Service containers are third-party images: GitLab's docker executor gives
// them only the job's public variables and the service's own variables,
// never the job token, registry passwords or DOCKER_AUTH_CONFIG (they would
// be readable by the service and by anyone running `podman inspect`).
func TestServiceEnvHasNoJobSecrets(t *testing.T) {
	secrets := map[string]string{
		"CI_JOB_TOKEN":         "glcbt-secret-job-token",
		"CI_REGISTRY_PASSWORD": "secret-registry-password",
		"CI_REPOSITORY_URL":    "https://gitlab-ci-token:glcbt-secret-job-token@gitlab.example.com/g/p.git",
		"DOCKER_AUTH_CONFIG":   `{"auths":{"r.example.com":{"auth":"dTpzZWNyZXQ="}}}`,
		"CI_JOB_SERVICES":      `[{"name":"` + testImage + `","alias":"db"}]`,
		"CI_PROJECT_PATH":      "g/p",
	}
	f := newFixture(t, secrets, nil)
	if err := f.e.PrepareStage(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, ok := f.fake.Spec(jobName + "-svc0")
	if !ok {
		t.Fatal("no service container")
	}
	for k, v := range svc.Env {
		if strings.Contains(v, "secret") || k == "DOCKER_AUTH_CONFIG" {
			t.Errorf("service env carries %s=%q", k, v)
		}
	}
}

// GitLab reads an image without a registry ("ruby:3.2", "bitnami/redis")
// as a Docker Hub image. podman resolves short names through
// registries.conf, which on Debian/Ubuntu hosts has no unqualified-search
// registries: pulling "ruby:3.2" fails there with `short-name "ruby:3.2"
// did not resolve to an alias and no unqualified-search registries are
// defined` (checked against the CI podman service). The driver must pull
// (and create from) the fully qualified docker.io name.
func TestShortImageNamePulledFromDockerHub(t *testing.T) {
	f := newFixture(t, map[string]string{
		"CI_JOB_IMAGE":    "ruby:3.2",
		"CI_JOB_SERVICES": `[{"name":"bitnami/redis:7"}]`,
	}, nil)
	_ = f.e.PrepareStage(context.Background())
	for _, want := range []string{"docker.io/library/ruby:3.2", "docker.io/bitnami/redis:7"} {
		if _, ok := f.fake.Pulls[want]; !ok {
			t.Errorf("pulled %v, want %s among them", keys(f.fake.Pulls), want)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// With the job payload at hand, services get exactly its public, unmasked
// variables (plus their own).
func TestServiceEnvFromPayloadIsPublicOnly(t *testing.T) {
	j := Job{Vars: map[string]string{"CI_PROJECT_PATH": "g/p", "CI_JOB_TOKEN": "tok", "MY_SECRET_VAR": "s"},
		Response: JobResponse{Variables: []ResponseVar{
			{Key: "CI_PROJECT_PATH", Value: "g/p", Public: true},
			{Key: "CI_JOB_TOKEN", Value: "tok", Public: false},
			{Key: "MY_SECRET_VAR", Value: "s", Public: true, Masked: true},
			{Key: "FEATURE", Value: "on", Public: true},
		}}}
	env := j.ServiceEnv()
	if len(env) != 2 || env["CI_PROJECT_PATH"] != "g/p" || env["FEATURE"] != "on" {
		t.Errorf("service env %v, want only CI_PROJECT_PATH and FEATURE", env)
	}
}
