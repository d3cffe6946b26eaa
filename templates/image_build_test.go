package templates_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/templates"
)

// The component is tested as GitLab and a runner run it: the fake GitLab
// resolves a project's include: component: line (its inputs, GitLab's
// interpolation), hands the job to a runner through the jobs API, and the
// test runs the job's script with sh (dash where it is /bin/sh: POSIX),
// the job's variables in its environment expanded as GitLab Runner
// expands them, and a buildah on PATH that records what it was asked.

const registry = "registry.test:5000"

// runnerToken is the fake's default runner token.
const runnerToken = gitlabtest.DefaultRunnerToken

// include is a project's .gitlab-ci.yml of one include line with inputs
// (YAML lines under inputs:).
func include(inputs ...string) string {
	s := "include:\n  - component: $CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0\n"
	if len(inputs) > 0 {
		s += "    inputs:\n      " + strings.Join(inputs, "\n      ") + "\n"
	}
	return s
}

// forwarding is the .gitlab-ci.yml of a project that refuses pipeline
// variables: its own header declares depsd's inputs and forwards them.
const forwarding = `spec:
  inputs:
    depsd_action_id:
      default: ""
    depsd_no_cache:
      type: boolean
      default: false
    depsd_validate:
      type: boolean
      default: false
    depsd_build_contexts:
      default: ""
    depsd_validate_tag:
      default: ""
---
include:
  - component: $CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0
    inputs:
      depsd_action_id: $[[ inputs.depsd_action_id ]]
      depsd_no_cache: $[[ inputs.depsd_no_cache ]]
      depsd_validate: $[[ inputs.depsd_validate ]]
      depsd_build_contexts: $[[ inputs.depsd_build_contexts ]]
      depsd_validate_tag: $[[ inputs.depsd_validate_tag ]]
`

// world is a fake GitLab with the component project and acme/app.
type world struct {
	t   *testing.T
	srv *gitlabtest.Server
}

func newWorld(t *testing.T, appCI string) *world {
	t.Helper()
	srv := gitlabtest.New(gitlabtest.Options{RegistryHost: registry, JobsLongPoll: 50 * time.Millisecond})
	t.Cleanup(srv.Close)
	if _, err := srv.AddProject(gitlabtest.Project{Path: "acme/ci-components", Files: map[string]string{
		"README.md": "Components\n", "templates/image-build.yml": templates.ImageBuild}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateTag("acme/ci-components", "1.0.0", "main"); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetVisibility("acme/ci-components", gitlabtest.VisibilityPublic); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddProject(gitlabtest.Project{Path: "acme/app", Files: map[string]string{
		".gitlab-ci.yml": appCI, "Containerfile": "FROM " + registry + "/acme/base:latest\n"}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetPipelineBehavior("acme/app", gitlabtest.Behavior{Jobs: true, OnTag: true, OnMergeRequest: true}); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, srv: srv}
}

// api sends a REST request with the server's token and decodes its answer.
func (w *world) api(method, path string, body any) (int, map[string]any) {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.srv.APIURL()+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("PRIVATE-TOKEN", w.srv.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// createPipeline creates an API pipeline of main, as depsd does, with
// inputs or variables.
func (w *world) createPipeline(inputs map[string]any, vars map[string]string) map[string]any {
	w.t.Helper()
	body := map[string]any{"ref": "main"}
	if inputs != nil {
		body["inputs"] = inputs
	}
	var list []map[string]string
	for k, v := range vars {
		list = append(list, map[string]string{"key": k, "value": v})
	}
	if list != nil {
		body["variables"] = list
	}
	code, pl := w.api("POST", "/projects/acme%2Fapp/pipeline", body)
	if code != http.StatusCreated {
		w.t.Fatalf("create pipeline: %d %v", code, pl)
	}
	return pl
}

// job is what a runner gets (GitLab Runner's common.JobResponse, the
// fields the test reads).
type job struct {
	JobInfo struct {
		Name, Stage string
	} `json:"job_info"`
	Image struct {
		Name string
	}
	Variables []struct {
		Key, Value string
		Raw        bool
	}
	Steps []struct {
		Name   string
		Script []string
	}
}

// takeJob requests the next job as a runner.
func (w *world) takeJob() job {
	w.t.Helper()
	b, _ := json.Marshal(map[string]string{"token": runnerToken})
	resp, err := http.Post(w.srv.APIURL()+"/jobs/request", "application/json", bytes.NewReader(b))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		w.t.Fatalf("request a job: %d %s", resp.StatusCode, body)
	}
	var j job
	if err := json.Unmarshal(body, &j); err != nil {
		w.t.Fatal(err)
	}
	return j
}

// env is the job's environment as GitLab Runner makes it: every variable
// that is not raw expanded against the others (JobVariables.Expand).
func (j job) env() map[string]string {
	vars := map[string]string{}
	for _, v := range j.Variables {
		vars[v.Key] = v.Value
	}
	out := map[string]string{}
	for _, v := range j.Variables {
		if v.Raw {
			out[v.Key] = v.Value
			continue
		}
		out[v.Key] = os.Expand(v.Value, func(k string) string { return vars[k] })
	}
	return out
}

// run runs the job's script and returns its output and the buildah
// commands it ran, one line each.
func (j job) run(t *testing.T) (output string, buildah []string, err error) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "buildah.log")
	stub := "#!/bin/sh\necho \"$*\" >> " + calls + "\nif [ \"$1\" = login ]; then cat > " + filepath.Join(dir, "password") + "; fi\n"
	if err := os.WriteFile(filepath.Join(bin, "buildah"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, s := range j.Steps {
		if s.Name == "script" {
			script = s.Script
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-e", "-c", strings.Join(script, "\n"))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir}
	for k, v := range j.env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(calls)
	return string(out), strings.Split(strings.TrimSpace(string(b)), "\n"), err
}

const (
	img   = registry + "/acme/app"
	login = "login -u gitlab-ci-token --password-stdin " + registry
)

// build is the build command line the component runs, with these flags
// (after --layers --format oci) and tags.
func build(flags string, tags ...string) string {
	s := "build --layers --format oci " + flags
	for _, t := range tags {
		s += " --tag " + img + ":" + t
	}
	return s + " ."
}

// pushes are the push commands of tags.
func pushes(tags ...string) []string {
	var out []string
	for _, t := range tags {
		out = append(out, "push "+img+":"+t)
	}
	return out
}

// TestImageBuild: what the component builds and pushes in each kind of
// pipeline, and how depsd's inputs and variables change it.
func TestImageBuild(t *testing.T) {
	t.Parallel()
	const base = registry + "/acme/base:latest"
	const candidate = "docker-image://" + registry + "/acme/base@sha256:" + "c0ffee"
	for _, tc := range []struct {
		name string
		ci   string
		// start starts the pipeline whose job is run.
		start func(w *world)
		want  []string // buildah's commands after login
		// wantLog is in the job's output.
		wantLog string
		// wantName is the pipeline's name (API creates only).
		wantName string
	}{
		{
			name: "the default branch pushes latest", ci: include(),
			start: func(w *world) { w.run("main", "push") },
			want:  append([]string{build("--pull=true", "latest")}, pushes("latest")...), wantLog: "pushed " + img + ":latest",
		},
		{
			name: "the default branch pushes the tags input", ci: include(`tags: "latest stable"`, `tls_verify: false`, `containerfile: build/Containerfile`, `context: build`, `build_args: "A=1 B=2"`),
			start: func(w *world) { w.run("main", "push") },
			want: append([]string{"build --layers --format oci --tls-verify=false --pull=true --file build/Containerfile --build-arg A=1 --build-arg B=2 --tag " + img + ":latest --tag " + img + ":stable build"},
				"push --tls-verify=false "+img+":latest", "push --tls-verify=false "+img+":stable"),
		},
		{
			name: "depsd's inputs: the action names the pipeline, no cache", ci: forwarding,
			start: func(w *world) {
				w.createPipeline(map[string]any{"depsd_action_id": "a-1", "depsd_no_cache": "true"}, nil)
			},
			want: append([]string{build("--no-cache --pull=always", "latest")}, pushes("latest")...), wantLog: "depsd action a-1", wantName: "depsd a-1",
		},
		{
			name: "depsd's variables: no cache", ci: include(),
			start: func(w *world) {
				w.createPipeline(nil, map[string]string{"DEPSD_ACTION_ID": "a-2", "DEPSD_NO_CACHE": "1"})
			},
			want: append([]string{build("--no-cache --pull=always", "latest")}, pushes("latest")...), wantLog: "depsd action a-2", wantName: "depsd",
		},
		{
			name: "a validation through inputs builds on the candidate and pushes its tag only", ci: forwarding,
			start: func(w *world) {
				w.createPipeline(map[string]any{"depsd_action_id": "a-3", "depsd_validate": "true", "depsd_validate_tag": "depsd-validate-a-3",
					"depsd_build_contexts": base + "=" + candidate + " RUBY_IMAGE=docker-image://" + registry + "/acme/ruby@sha256:beef"}, nil)
			},
			want: append([]string{build("--pull=true --build-context "+base+"="+candidate+" --build-arg RUBY_IMAGE="+registry+"/acme/ruby@sha256:beef", "depsd-validate-a-3")},
				pushes("depsd-validate-a-3")...),
			wantLog: "a validation build", wantName: "depsd a-3",
		},
		{
			name: "a validation through variables without a tag pushes nothing", ci: include(),
			start: func(w *world) {
				w.createPipeline(nil, map[string]string{"DEPSD_ACTION_ID": "a-4", "DEPSD_VALIDATE": "1", "DEPSD_BUILD_CONTEXTS": "RUBY_IMAGE=" + candidate})
			},
			want:    []string{build("--pull=true --build-arg RUBY_IMAGE=" + registry + "/acme/base@sha256:c0ffee")},
			wantLog: "built; a validation build pushes nothing",
		},
		{
			name: "a release tag pushes its versions", ci: include(),
			start: func(w *world) { w.tag("v3.2.1") },
			want:  append([]string{build("--pull=true", "3.2.1", "3.2", "3", "latest")}, pushes("3.2.1", "3.2", "3", "latest")...),
		},
		{
			name: "a release tag of two parts", ci: include(`release_tags: "{version} {major}"`),
			start: func(w *world) { w.tag("4.1") },
			want:  append([]string{build("--pull=true", "4.1", "4")}, pushes("4.1", "4")...),
		},
		{
			name: "a pre-release pushes its version only", ci: include(),
			start: func(w *world) { w.tag("v2.0.0-rc.1") },
			want:  append([]string{build("--pull=true", "2.0.0-rc.1")}, pushes("2.0.0-rc.1")...),
		},
		{
			name: "a tag that is no version pushes its name", ci: include(),
			start: func(w *world) { w.tag("nightly/2026") },
			want:  append([]string{build("--pull=true", "nightly-2026")}, pushes("nightly-2026")...),
		},
		{
			name: "a merge request's pipeline pushes the candidate", ci: include(),
			start: func(w *world) { w.openMR(true) },
			want:  append([]string{build("--pull=true", "mr-1")}, pushes("mr-1")...), wantLog: "merge request !1",
		},
		{
			name: "a branch with an open merge request pushes the candidate", ci: include(`candidate_tag: "candidate-{iid}"`),
			start: func(w *world) { w.openMR(false); w.run("feature", "push") },
			want:  append([]string{build("--pull=true", "candidate-1")}, pushes("candidate-1")...),
		},
		{
			name: "another branch builds only", ci: include(),
			start: func(w *world) {
				if err := w.srv.CreateBranch("acme/app", "feature"); err != nil {
					t.Fatal(err)
				}
				w.run("feature", "push")
			},
			want: []string{build("--pull=true")}, wantLog: "built; branch feature pushes nothing",
		},
		{
			name: "a protected maintenance branch pushes branch_tags", ci: include(`branch_tags: "{ref}"`),
			start: func(w *world) {
				if err := w.srv.CreateBranch("acme/app", "release/bookworm"); err != nil {
					t.Fatal(err)
				}
				if err := w.srv.ProtectBranch("acme/app", "release/*", gitlabtest.Protection{}); err != nil {
					t.Fatal(err)
				}
				w.run("release/bookworm", "push")
			},
			want: append([]string{build("--pull=true", "release-bookworm")}, pushes("release-bookworm")...),
		},
		{
			name: "pull false, and a rebuild without cache pulls all the same", ci: include(`pull: "false"`),
			start: func(w *world) { w.createPipeline(nil, map[string]string{"DEPSD_NO_CACHE": "1"}) },
			want:  append([]string{build("--no-cache --pull=always", "latest")}, pushes("latest")...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.ci)
			w.t = t
			tc.start(w)
			j := w.takeJob()
			if j.JobInfo.Name != "image-build" || j.JobInfo.Stage != "build" || j.Image.Name != "quay.io/buildah/stable:latest" {
				t.Errorf("job %q, stage %q, image %q: want image-build, build, quay.io/buildah/stable:latest", j.JobInfo.Name, j.JobInfo.Stage, j.Image.Name)
			}
			out, calls, err := j.run(t)
			if err != nil {
				t.Fatalf("script: %v\n%s", err, out)
			}
			if len(calls) == 0 || !strings.HasPrefix(calls[0], "login") {
				t.Fatalf("buildah calls %q: want a login to the project's registry first\n%s", calls, out)
			}
			if wantLogin := strings.Replace(login, "login", "login"+tlsFlag(tc.want), 1); calls[0] != wantLogin {
				t.Errorf("login: %q, want %q", calls[0], wantLogin)
			}
			if !slices.Equal(calls[1:], tc.want) {
				t.Errorf("buildah after login:\n got %q\nwant %q\n%s", calls[1:], tc.want, out)
			}
			if tc.wantLog != "" && !strings.Contains(out, tc.wantLog) {
				t.Errorf("job output lacks %q:\n%s", tc.wantLog, out)
			}
			if tc.wantName != "" {
				pls := w.srv.Pipelines("acme/app")
				_, pl := w.api("GET", "/projects/acme%2Fapp/pipelines/"+itoa(pls[len(pls)-1].ID), nil)
				if name, _ := pl["name"].(string); strings.TrimSpace(name) != tc.wantName {
					t.Errorf("pipeline name %q, want %q", name, tc.wantName)
				}
			}
		})
	}
}

// An ARG written as a FROM writes it (${RUBY_IMAGE}) is expanded by the
// runner before the script sees it: the job fails, saying how to write it.
func TestImageBuildRefusesAnExpandedArg(t *testing.T) {
	t.Parallel()
	w := newWorld(t, include())
	w.createPipeline(nil, map[string]string{"DEPSD_VALIDATE": "1", "DEPSD_BUILD_CONTEXTS": "${RUBY_IMAGE}=docker-image://" + registry + "/acme/ruby@sha256:beef"})
	out, calls, err := w.takeJob().run(t)
	if err == nil || !strings.Contains(out, "has no name") || slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "build") }) {
		t.Errorf("script: %v, buildah %q\n%s\nwant a failure before the build", err, calls, out)
	}
}

// tlsFlag is " --tls-verify=false" where the expected build has it.
func tlsFlag(want []string) string {
	if len(want) > 0 && strings.Contains(want[0], "--tls-verify=false") {
		return " --tls-verify=false"
	}
	return ""
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// run runs a pipeline of ref as GitLab does for a push or a tag.
func (w *world) run(ref, source string) {
	w.t.Helper()
	if _, err := w.srv.RunPipeline("acme/app", ref, source); err != nil {
		w.t.Fatal(err)
	}
}

// tag creates a tag (its tag pipeline starts).
func (w *world) tag(name string) {
	w.t.Helper()
	if err := w.srv.CreateTag("acme/app", name, "main"); err != nil {
		w.t.Fatal(err)
	}
}

// openMR opens merge request !1 from feature; with its pipeline or not.
func (w *world) openMR(withPipeline bool) {
	w.t.Helper()
	if !withPipeline {
		if err := w.srv.SetPipelineBehavior("acme/app", gitlabtest.Behavior{Jobs: true}); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := w.srv.CreateBranch("acme/app", "feature"); err != nil {
		w.t.Fatal(err)
	}
	if code, body := w.api("POST", "/projects/acme%2Fapp/merge_requests", map[string]any{"source_branch": "feature", "target_branch": "main", "title": "t"}); code != http.StatusCreated {
		w.t.Fatalf("open a merge request: %d %v", code, body)
	}
}
