package executor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// TestJobImageOptions: `image:` entrypoint, pull_policy, docker user and
// platform from the job payload reach podman.
func TestJobImageOptions(t *testing.T) {
	tests := []struct {
		name    string
		image   func(*ResponseImage)
		cfg     func(*Config)
		wantErr string // a JobError (build failure) containing this
		check   func(t *testing.T, f *fixture, spec container.Spec)
	}{
		{name: "no options: the image's entrypoint runs the main process", check: func(t *testing.T, _ *fixture, s container.Spec) {
			if s.Entrypoint != nil || !slices.Equal(s.Command, keepAlive) || s.User != "" || s.Platform != "" {
				t.Errorf("spec entrypoint %q command %q user %q platform %q", s.Entrypoint, s.Command, s.User, s.Platform)
			}
		}},
		{name: "entrypoint override", image: func(i *ResponseImage) { i.Entrypoint = []string{"/bin/setup", "--x"} },
			check: func(t *testing.T, _ *fixture, s container.Spec) {
				if !slices.Equal(s.Entrypoint, []string{"/bin/setup", "--x"}) || !slices.Equal(s.Command, keepAlive) {
					t.Errorf("spec entrypoint %q command %q", s.Entrypoint, s.Command)
				}
			}},
		{name: `entrypoint [""] disables it`, image: func(i *ResponseImage) { i.Entrypoint = []string{""} },
			check: func(t *testing.T, _ *fixture, s container.Spec) {
				if !slices.Equal(s.Entrypoint, keepAlive) || len(s.Command) != 0 {
					t.Errorf("spec entrypoint %q command %q", s.Entrypoint, s.Command)
				}
			}},
		{name: "docker user and platform", image: func(i *ResponseImage) {
			i.ExecutorOpts.Docker.User = "1000:1000"
			i.ExecutorOpts.Docker.Platform = "linux/arm64/v8"
		}, cfg: func(c *Config) { c.PullPolicy = "always" },
			check: func(t *testing.T, f *fixture, s container.Spec) {
				if s.User != "1000:1000" || s.Platform != "linux/arm64/v8" {
					t.Errorf("spec user %q platform %q", s.User, s.Platform)
				}
				if p := f.fake.Pulls[testImage].Platform; p != "linux/arm64/v8" {
					t.Errorf("pulled for platform %q", p)
				}
			}},
		{name: "allowed pull policy", image: func(i *ResponseImage) { i.PullPolicy = []string{"always"} },
			cfg: func(c *Config) { c.AllowedPullPolicies = []string{"always", "if-not-present"} },
			check: func(t *testing.T, f *fixture, _ container.Spec) {
				if o, ok := f.fake.Pulls[testImage]; !ok || o.Policy != "always" {
					t.Errorf("pull %+v %v", o, ok)
				}
			}},
		{name: "pull policy refused", image: func(i *ResponseImage) { i.PullPolicy = []string{"always"} },
			wantErr: "pull_policy (always) defined in the job is not one of the allowed_pull_policies of this runner (if-not-present)"},
		{name: "pull policies tried in order", image: func(i *ResponseImage) { i.PullPolicy = []string{"never", "if-not-present"} },
			cfg: func(c *Config) {
				c.AllowedPullPolicies = []string{"never", "if-not-present"}
				c.DefaultImage = "docker.io/library/alpine:3"
			},
			check: func(t *testing.T, f *fixture, _ container.Spec) {
				if !strings.Contains(f.out.String(), "WARNING: pull_policy never for docker.io/library/alpine:3 failed") {
					t.Errorf("job log:\n%s", f.out)
				}
				if _, ok := f.fake.Pulls["docker.io/library/alpine:3"]; !ok {
					t.Error("second policy not tried")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, tt.cfg)
			if tt.image != nil {
				tt.image(&f.e.Job.Response.Image)
			}
			err := f.e.PrepareStage(context.Background())
			if tt.wantErr != "" {
				var je *JobError
				if !errors.As(err, &je) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want a JobError with %q", err, tt.wantErr)
				}
				if slices.ContainsFunc(f.fake.Calls, func(c string) bool { return strings.HasPrefix(c, "create ") }) {
					t.Errorf("created containers after refusing: %v", f.fake.Calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepare: %v\n%s", err, f.out)
			}
			spec, _ := f.fake.Spec(jobName)
			tt.check(t, f, spec)
		})
	}
}

func TestAllowedPullPoliciesValidated(t *testing.T) {
	_, err := parseConfig(`allowed_pull_policies = ["always", "sometimes"]`, "c.toml", Defaults(Host{UID: 0}))
	if err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Fatalf("err = %v", err)
	}
}
