package executor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestServiceAliases(t *testing.T) {
	tests := []struct {
		svc  Service
		want []string
	}{
		{Service{Name: "redis:7"}, []string{"redis"}},
		{Service{Name: "tutum/wordpress:latest"}, []string{"tutum__wordpress", "tutum-wordpress"}},
		{Service{Name: "registry.example.com:5000/group/db:1@sha256:abc", Alias: "db"},
			[]string{"db", "registry.example.com:5000__group__db", "registry.example.com:5000-group-db"}},
		{Service{Name: "postgres", Alias: "pg, primary"}, []string{"pg", "primary", "postgres"}},
	}
	for _, tt := range tests {
		t.Run(tt.svc.Name, func(t *testing.T) {
			if got := ServiceAliases(tt.svc); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRegistryHost(t *testing.T) {
	tests := map[string]string{
		"alpine":                            "docker.io",
		"library/alpine:3":                  "docker.io",
		"registry.gitlab.com/g/p:1":         "registry.gitlab.com",
		"localhost/busybox-test:latest":     "localhost",
		"127.0.0.1:5000/x":                  "127.0.0.1:5000",
		"docker.io/library/debian:bookworm": "docker.io",
	}
	for in, want := range tests {
		if got := registryHost(in); got != want {
			t.Errorf("registryHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGlobsValidated(t *testing.T) {
	for _, g := range []string{"", "docker.io/[abc", "docker.io/{a,b"} {
		if _, err := parseConfig(fmt.Sprintf("allowed_images = [%q]", g), "c.toml", Defaults(Host{UID: 0})); err == nil {
			t.Errorf("glob %q accepted", g)
		}
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		image string
		globs []string
		want  bool
	}{
		{"anything", nil, true},
		{"docker.io/library/alpine:3", []string{"docker.io/library/*"}, true},
		{"docker.io/library/x/y:1", []string{"docker.io/library/*"}, false},
		{"registry.example.com/a/b/c:1", []string{"registry.example.com/**"}, true},
		{"evil.example.com/registry.example.com/x", []string{"registry.example.com/**"}, false},
		{"redis:7", []string{"redis:?"}, true},
		{"redis:7.2", []string{"redis:?"}, false},
		{"a.b", []string{"a?b"}, true},
		{"axb", []string{"a.b"}, false},
		// doublestar's dialect, shared with depsd's scope globs
		{"docker.io/library/postgres:16", []string{"docker.io/library/{postgres,redis}:*"}, true},
		{"docker.io/library/mysql:8", []string{"docker.io/library/{postgres,redis}:*"}, false},
		{"registry.example.com/team-b/app:1", []string{"registry.example.com/team-[ab]/**"}, true},
		{"registry.example.com/team-c/app:1", []string{"registry.example.com/team-[ab]/**"}, false},
	}
	for _, tt := range tests {
		if got := allowed(tt.image, tt.globs); got != tt.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", tt.image, tt.globs, got, tt.want)
		}
	}
}

func TestNamesAreDistinctPerSlotAndJob(t *testing.T) {
	a := Identity{Runner: "tok", Project: "7", Concurrent: "0", Job: "100"}
	b := a
	b.Concurrent = "1"
	c := a
	c.Job = "101"
	d := Identity{Runner: "t/o k", Project: "7", Concurrent: "0", Job: "100"}
	names := []string{a.JobName(), b.JobName(), c.JobName(), d.JobName()}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[i] == names[j] {
				t.Errorf("names collide: %q", names[i])
			}
		}
	}
	if got := d.JobName(); got != "podman-executor-rt_o_k-p7-c0-j100" {
		t.Errorf("unsafe characters kept: %q", got)
	}
}

// TestIdentityComesFromTheJobResponse: the project and job ids that name
// a job's containers, cache and volumes are the job response's, whatever
// the job's variables say, and a job whose payload redefines what its
// identity rests on is refused as the job's own error.
func TestIdentityComesFromTheJobResponse(t *testing.T) {
	predefined := []ResponseVar{{Key: "CI_JOB_ID", Value: "100"}, {Key: "CI_PROJECT_ID", Value: "202"},
		{Key: "CI_RUNNER_ID", Value: "9"}, {Key: "CI_RUNNER_TAGS", Value: "[]"}, {Key: "CI_COMMIT_REF_NAME", Value: "main"}}
	tests := []struct {
		name    string
		vars    []ResponseVar // after the predefined ones, as GitLab sends a job's own
		noIDs   bool
		slot    string
		refused string // the variable named in the JobError; "" accepts
		fails   bool   // an error that is not the job's
	}{
		{name: "predefined only"},
		{name: "a variable of the job's own", vars: []ResponseVar{{Key: "DEPLOY", Value: "1"}}},
		{name: "CI_PROJECT_ID redefined", vars: []ResponseVar{{Key: "CI_PROJECT_ID", Value: "101"}}, refused: "CI_PROJECT_ID"},
		{name: "CI_JOB_ID redefined", vars: []ResponseVar{{Key: "CI_JOB_ID", Value: "99"}}, refused: "CI_JOB_ID"},
		{name: "CI_PROJECT_ID defined again with its value", vars: []ResponseVar{{Key: "CI_PROJECT_ID", Value: "202"}}},
		{name: "CI_CONCURRENT_PROJECT_ID defined", vars: []ResponseVar{{Key: "CI_CONCURRENT_PROJECT_ID", Value: "0"}}, refused: "CI_CONCURRENT_PROJECT_ID"},
		{name: "CI_CONCURRENT_ID defined", vars: []ResponseVar{{Key: "CI_CONCURRENT_ID", Value: "3"}}, refused: "CI_CONCURRENT_ID"},
		{name: "CI_RUNNER_SHORT_TOKEN defined", vars: []ResponseVar{{Key: "CI_RUNNER_SHORT_TOKEN", Value: "abc"}}, refused: "CI_RUNNER_SHORT_TOKEN"},
		{name: "CI_RUNNER_ID redefined", vars: []ResponseVar{{Key: "CI_RUNNER_ID", Value: "8"}}, refused: "CI_RUNNER_ID"},
		{name: "two redefined", vars: []ResponseVar{{Key: "CI_JOB_ID", Value: "1"}, {Key: "CI_PROJECT_ID", Value: "1"}}, refused: "CI_JOB_ID, CI_PROJECT_ID"},
		{name: "no ids in the response", noIDs: true, fails: true},
		{name: "a slot that is not a number", slot: "x", fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Job{Vars: map[string]string{"CI_PROJECT_ID": "101", "CI_JOB_ID": "99", "CI_CONCURRENT_PROJECT_ID": "1",
				"CI_RUNNER_SHORT_TOKEN": "abc"}}
			if tt.slot != "" {
				j.Vars["CI_CONCURRENT_PROJECT_ID"] = tt.slot
			}
			if !tt.noIDs {
				j.Response.ID, j.Response.JobInfo.ProjectID = 100, 202
			}
			j.Response.Variables = append(slices.Clone(predefined), tt.vars...)
			err := j.CheckIdentity()
			var je *JobError
			switch {
			case tt.refused != "":
				if !errors.As(err, &je) || !strings.Contains(je.Msg, "redefine "+tt.refused+":") {
					t.Fatalf("err = %v, want a JobError naming %s", err, tt.refused)
				}
			case tt.fails:
				if err == nil || errors.As(err, &je) {
					t.Fatalf("err = %v, want an error that is not the job's", err)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			default:
				want := Identity{Runner: "r1", Project: "202", Concurrent: "1", Job: "100"}
				if got := j.Identity("r1"); got != want {
					t.Errorf("identity %+v, want %+v (the response's ids, the config's runner name)", got, want)
				}
			}
		})
	}
}
