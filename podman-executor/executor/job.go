package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Job is what the runner tells the driver about the current job: the
// CUSTOM_ENV_* variables (the job's CI variables), the exit-code contract
// and the job response file. It is parsed once per stage from the
// environment, with no I/O besides reading JOB_RESPONSE_FILE.
type Job struct {
	// Vars are the job's variables, CUSTOM_ENV_ prefix removed.
	Vars map[string]string
	// Driver are the driver's other environment variables (job_env from
	// the config stage arrives here unprefixed).
	Driver map[string]string
	// Response is the decoded JOB_RESPONSE_FILE; zero when absent.
	Response JobResponse
	Codes    ExitCodes
}

// ExitCodes is the runner's exit-code contract for run and the other stages.
type ExitCodes struct {
	BuildFailure  int
	SystemFailure int
	// File receives the script's own exit code on a build failure.
	File string
}

// JobResponse is the part of the runner's job payload the driver uses
// (GitLab Runner's common.JobResponse, as the runner writes it to
// JOB_RESPONSE_FILE, under the same JSON names).
type JobResponse struct {
	// ID is the job's id and JobInfo.ProjectID its project's, as GitLab
	// sent them: what names the job's containers, caches and volumes (a
	// job's variables can redefine CI_JOB_ID and CI_PROJECT_ID, not these).
	ID      int64 `json:"id"`
	JobInfo struct {
		ProjectID int64 `json:"project_id"`
	} `json:"job_info"`
	// GitInfo.Protected says whether the job's ref is protected (GitLab
	// 18.3 and runners that know it; absent otherwise).
	GitInfo struct {
		Protected *bool `json:"protected"`
	} `json:"git_info"`
	Image       ResponseImage        `json:"image"`
	Services    []ResponseImage      `json:"services"`
	Credentials []ResponseCredential `json:"credentials"`
	// Variables are the job's variables with their visibility: the
	// public ones (not masked, not the job token) are what services get.
	Variables []ResponseVar `json:"variables"`
}

// ResponseImage is an image or service of the job payload.
type ResponseImage struct {
	Name       string        `json:"name"`
	Alias      string        `json:"alias"`
	Entrypoint []string      `json:"entrypoint"`
	Command    []string      `json:"command"`
	PullPolicy []string      `json:"pull_policy"`
	Variables  []ResponseVar `json:"variables"`
	// ExecutorOpts are `image: docker: {user, platform}` of .gitlab-ci.yml.
	ExecutorOpts struct {
		Docker struct {
			User     string `json:"user"`
			Platform string `json:"platform"`
		} `json:"docker"`
	} `json:"executor_opts"`
}

// ResponseVar is one variable of the job payload.
type ResponseVar struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Public bool   `json:"public"`
	Masked bool   `json:"masked"`
}

// ResponseCredential is a registry credential the runner hands the job
// (the CI job token for the instance's registry).
type ResponseCredential struct {
	Type     string `json:"type"`
	URL      string `json:"url"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// Service is one entry of CI_JOB_SERVICES.
type Service struct {
	Name       string   `json:"name"`
	Alias      string   `json:"alias"`
	Entrypoint []string `json:"entrypoint"`
	Command    []string `json:"command"`
	// Variables and PullPolicy come from the job payload, matched by name
	// and alias.
	Variables  map[string]string `json:"-"`
	PullPolicy []string          `json:"-"`
	// Aliases are the network names of the service, derived from Name as
	// the job wrote it (see ServiceAliases).
	Aliases []string `json:"-"`
	// Privileged is set by prepare, from Name as the job wrote it.
	Privileged bool `json:"-"`
}

// ServiceEnv is the environment a service container gets besides its own
// variables: services are third-party images, so, as GitLab's docker
// executor does, only the job's public variables. Without the job payload
// (which says which are public), every variable except the known secrets.
func (j Job) ServiceEnv() map[string]string {
	env := map[string]string{}
	if len(j.Response.Variables) > 0 {
		for _, v := range j.Response.Variables {
			if v.Public && !v.Masked {
				env[v.Key] = v.Value
			}
		}
		return env
	}
	for k, v := range j.Vars {
		if !secretVariable(k) {
			env[k] = v
		}
	}
	return env
}

// secretVariable names the variables that carry credentials.
func secretVariable(key string) bool {
	switch key {
	case "CI_JOB_TOKEN", "CI_REPOSITORY_URL", "CI_REGISTRY_PASSWORD", "CI_DEPENDENCY_PROXY_PASSWORD",
		"CI_BUILD_TOKEN", "DOCKER_AUTH_CONFIG", "CI_JOB_JWT", "CI_JOB_JWT_V1", "CI_JOB_JWT_V2":
		return true
	}
	return strings.HasSuffix(key, "_PASSWORD") || strings.HasSuffix(key, "_TOKEN") || strings.HasSuffix(key, "_SECRET")
}

// ParseJob reads the job from the driver's environment (KEY=value list).
func ParseJob(environ []string) (Job, error) {
	j := Job{Vars: map[string]string{}, Driver: map[string]string{}}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if name, ok := strings.CutPrefix(k, "CUSTOM_ENV_"); ok {
			j.Vars[name] = v
		} else {
			j.Driver[k] = v
		}
	}
	j.Codes = ParseExitCodes(j.Driver)
	if path := j.Driver["JOB_RESPONSE_FILE"]; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return j, fmt.Errorf("read job response: %w", err)
		}
		if err := json.Unmarshal(b, &j.Response); err != nil {
			return j, fmt.Errorf("decode job response %s: %w", path, err)
		}
	}
	return j, nil
}

// ParseExitCodes reads BUILD_FAILURE_EXIT_CODE, SYSTEM_FAILURE_EXIT_CODE and
// BUILD_EXIT_CODE_FILE, defaulting to 1 and 2 when run by hand.
func ParseExitCodes(env map[string]string) ExitCodes {
	c := ExitCodes{BuildFailure: 1, SystemFailure: 2, File: env["BUILD_EXIT_CODE_FILE"]}
	if n, err := strconv.Atoi(env["BUILD_FAILURE_EXIT_CODE"]); err == nil {
		c.BuildFailure = n
	}
	if n, err := strconv.Atoi(env["SYSTEM_FAILURE_EXIT_CODE"]); err == nil {
		c.SystemFailure = n
	}
	return c
}

// Image is the job's image: CI_JOB_IMAGE, else the configured default.
func (j Job) Image(c Config) string {
	if img := strings.TrimSpace(j.Vars["CI_JOB_IMAGE"]); img != "" {
		return img
	}
	return c.DefaultImage
}

// Services decodes CI_JOB_SERVICES (a JSON array, or empty for none) and
// adds each service's variables from the job payload.
func (j Job) Services() ([]Service, error) {
	raw := strings.TrimSpace(j.Vars["CI_JOB_SERVICES"])
	if raw == "" || raw == "null" {
		return nil, nil
	}
	var list []Service
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, fmt.Errorf("decode CI_JOB_SERVICES: %w", err)
	}
	for i := range list {
		for _, r := range j.Response.Services {
			if r.Name != list[i].Name || r.Alias != list[i].Alias {
				continue
			}
			list[i].PullPolicy = r.PullPolicy
			if len(r.Variables) == 0 {
				continue
			}
			list[i].Variables = map[string]string{}
			for _, v := range r.Variables {
				list[i].Variables[v.Key] = v.Value
			}
		}
	}
	return list, nil
}

// Identity is what names and labels a job's containers: which runner,
// project, concurrent slot and job.
type Identity struct {
	Runner, Project, Concurrent, Job string
	// Protected: the job's ref is protected and its cache and volumes are
	// kept apart from the project's other refs' (split_protected_refs).
	Protected bool
}

// Protected reports whether the job's ref is protected, as the job
// response says: git_info.protected where the runner passes it (GitLab
// 18.3 on), else GitLab's CI_COMMIT_REF_PROTECTED, which is the first of
// that name (a job's own `variables:` come after GitLab's predefined
// ones; GitLab Runner reads it the same way).
func (j Job) Protected() bool {
	if p := j.Response.GitInfo.Protected; p != nil {
		return *p
	}
	for _, v := range j.Response.Variables {
		if v.Key == "CI_COMMIT_REF_PROTECTED" {
			return v.Value == "true"
		}
	}
	return false
}

// Identity is the job's identity on the runner named runner (the driver
// config's runner_name): the project and job ids from the job response,
// which GitLab wrote, never from variables, which the job's own
// `variables:` can redefine; the concurrent slot from
// CI_CONCURRENT_PROJECT_ID, which only the runner sets (its process adds
// it before the job's variables, and the last of a name wins: CheckIdentity
// refuses a job that defines it). Check the job with CheckIdentity first.
func (j Job) Identity(runner string) Identity {
	slot := j.Vars["CI_CONCURRENT_PROJECT_ID"]
	if slot == "" {
		slot = "0" // run by hand
	}
	return Identity{
		Runner:     runner,
		Project:    strconv.FormatInt(j.Response.JobInfo.ProjectID, 10),
		Concurrent: slot,
		Job:        strconv.FormatInt(j.Response.ID, 10),
	}
}

// runnerVariables are the CI_RUNNER_* variables the runner's process sets
// (GitLab sends CI_RUNNER_ID, _DESCRIPTION and _TAGS): in the job payload
// they can only be the job's own.
var runnerVariables = map[string]bool{"CI_RUNNER_SHORT_TOKEN": true, "CI_RUNNER_VERSION": true,
	"CI_RUNNER_REVISION": true, "CI_RUNNER_EXECUTABLE_ARCH": true}

// CheckIdentity refuses a job whose payload redefines what its identity
// rests on: CI_PROJECT_ID or CI_JOB_ID other than the job response's
// ids, any CI_CONCURRENT_* (only the runner's process sets them), a
// CI_RUNNER_* the runner sets, or one GitLab sends defined again with
// another value. GitLab sends a job's `variables:` after the predefined
// ones, so a redefinition shows as a second entry. Such a job is refused
// with a JobError (a build failure: retrying cannot help); a job response
// without ids is an error of the runner's.
func (j Job) CheckIdentity() error {
	r := j.Response
	if r.ID == 0 || r.JobInfo.ProjectID == 0 {
		return errors.New("the job response (JOB_RESPONSE_FILE) names no job id or project id: is the driver run by GitLab Runner?")
	}
	want := map[string]string{"CI_PROJECT_ID": strconv.FormatInt(r.JobInfo.ProjectID, 10), "CI_JOB_ID": strconv.FormatInt(r.ID, 10)}
	first := map[string]string{}
	var bad []string
	for _, v := range r.Variables {
		k := v.Key
		redefined := false
		switch {
		case want[k] != "":
			redefined = v.Value != want[k]
		case strings.HasPrefix(k, "CI_CONCURRENT_"), runnerVariables[k]:
			redefined = true
		case strings.HasPrefix(k, "CI_RUNNER_"):
			if f, ok := first[k]; ok {
				redefined = v.Value != f
			} else {
				first[k] = v.Value
			}
		}
		if redefined && !slices.Contains(bad, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return &JobError{Msg: fmt.Sprintf("the job's variables redefine %s: a job may not redefine CI_PROJECT_ID, CI_JOB_ID, CI_CONCURRENT_* or CI_RUNNER_*, "+
			"which name its containers, cache and volumes on this runner; remove them from the job's variables", strings.Join(bad, ", "))}
	}
	if slot := j.Vars["CI_CONCURRENT_PROJECT_ID"]; slot != "" && strings.Trim(slot, "0123456789") != "" {
		return fmt.Errorf("CI_CONCURRENT_PROJECT_ID %q from the runner is not a number", slot)
	}
	return nil
}
