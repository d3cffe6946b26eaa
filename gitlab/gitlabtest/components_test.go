package gitlabtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// componentCI is a component of acme/ci-components: a header with a
// string, a boolean and a required input, a workflow:name, and one job
// whose name, stage and script use them.
const componentCI = `spec:
  inputs:
    stage:
      default: build
    depsd_action_id:
      default: ""
    flag:
      type: boolean
      default: false
    greeting:
      description: required
---
workflow:
  name: "depsd $[[ inputs.depsd_action_id ]]"
"$[[ inputs.stage ]]-job":
  stage: $[[ inputs.stage ]]
  image: localhost/job:latest
  script:
    - echo "$[[ inputs.greeting ]] flag=$[[ inputs.flag ]] id=$[[ inputs.depsd_action_id ]] v1"
`

// includingCI includes the component at version with the project's own
// inputs forwarded, as a project that refuses pipeline variables does.
func includingCI(version string) string {
	return `spec:
  inputs:
    depsd_action_id:
      default: ""
    depsd_no_cache:
      type: boolean
      default: false
---
include:
  - component: $CI_SERVER_FQDN/acme/ci-components/image-build@` + version + `
    inputs:
      greeting: hello
      depsd_action_id: $[[ inputs.depsd_action_id ]]
      flag: $[[ inputs.depsd_no_cache ]]
`
}

// componentServer is a fake with the component project acme/ci-components
// (tag 1.0.0 holds componentCI; main moved on to a v2) and acme/app,
// whose pipelines are real jobs.
func componentServer(t *testing.T, appCI string) *Server {
	t.Helper()
	s := New(Options{Pipelines: Behavior{Jobs: true}, JobsLongPoll: 50 * time.Millisecond})
	t.Cleanup(s.Close)
	if _, err := s.AddProject(Project{Path: "acme/ci-components", Files: map[string]string{
		"README.md": "components\n", "templates/image-build.yml": componentCI,
		"templates/dir-build/template.yml": strings.ReplaceAll(componentCI, " v1", " dir"),
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPipelineBehavior("acme/ci-components", Behavior{}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTag("acme/ci-components", "1.0.0", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetFile("acme/ci-components", "templates/image-build.yml", strings.ReplaceAll(componentCI, " v1", " v2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVisibility("acme/ci-components", VisibilityInternal); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddProject(Project{Path: "acme/app", Files: map[string]string{".gitlab-ci.yml": appCI}, CI: RestrictedCISettings("")}); err != nil {
		t.Fatal(err)
	}
	return s
}

// takeJob requests a job as a runner does and returns it with its
// variables by key.
func takeJob(t *testing.T, s *Server) (jobResponseJSON, map[string]string) {
	t.Helper()
	code, _, body := runnerCall(t, s, "POST", "/jobs/request", nil, jsonBody(t, map[string]string{"token": DefaultRunnerToken}))
	if code != http.StatusCreated {
		t.Fatalf("request job: got %d %s, want 201", code, body)
	}
	var j jobResponseJSON
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range j.Variables {
		vars[v.Key] = v.Value
	}
	return j, vars
}

// A project's .gitlab-ci.yml that is one include: component: line (and
// the inputs it forwards from its own header) runs the component's job
// as GitLab does: the component fetched from the project at the version
// (a tag, a branch, a commit), its inputs interpolated with their types
// (a boolean stays a boolean when forwarded), its workflow:name naming
// the pipeline.
func TestIncludeComponent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, version, wantScript string }{
		{"a tag", "1.0.0", `echo "hello flag=true id=a-1 v1"`},
		{"a branch", "main", `echo "hello flag=true id=a-1 v2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := componentServer(t, includingCI(tc.version))
			code, body := postPipeline(t, s, "acme/app", `{"ref":"main","inputs":{"depsd_action_id":"a-1","depsd_no_cache":"true"}}`)
			if code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, body)
			}
			var pl struct {
				Name *string `json:"name"`
			}
			_ = json.Unmarshal([]byte(body), &pl)
			if pl.Name == nil || *pl.Name != "depsd a-1" {
				t.Errorf("pipeline name = %v, want the component's workflow:name \"depsd a-1\"", pl.Name)
			}
			j, vars := takeJob(t, s)
			if j.JobInfo.Name != "build-job" || j.JobInfo.Stage != "build" || j.Image.Name != "localhost/job:latest" {
				t.Errorf("job %q stage %q image %q, want build-job, build, localhost/job:latest", j.JobInfo.Name, j.JobInfo.Stage, j.Image.Name)
			}
			if got := strings.Join(j.Steps[0].Script, "\n"); got != tc.wantScript {
				t.Errorf("script = %q, want %q", got, tc.wantScript)
			}
			u, _ := url.Parse(s.URL)
			if vars["CI_SERVER_FQDN"] != u.Host {
				t.Errorf("CI_SERVER_FQDN = %q, want %q", vars["CI_SERVER_FQDN"], u.Host)
			}
		})
	}
	t.Run("a commit and a directory component", func(t *testing.T) {
		s := componentServer(t, "build:\n  script: echo\n")
		info, _ := s.Project("acme/ci-components")
		sha := s.headSHA(t, "acme/ci-components")
		ci := "include:\n  - component: $CI_SERVER_FQDN/" + info.Path + "/dir-build@" + sha + "\n    inputs:\n      greeting: hi\n      stage: test\n"
		if _, err := s.SetFile("acme/app", ".gitlab-ci.yml", ci); err != nil {
			t.Fatal(err)
		}
		code, body := postPipeline(t, s, "acme/app", `{"ref":"main"}`)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, body)
		}
		j, _ := takeJob(t, s)
		if got, want := strings.Join(j.Steps[0].Script, "\n"), `echo "hi flag=false id= dir"`; got != want || j.JobInfo.Name != "test-job" {
			t.Errorf("job %q script %q, want test-job %q", j.JobInfo.Name, got, want)
		}
	})
	t.Run("the including file's keys win", func(t *testing.T) {
		ci := includingCI("1.0.0") + "build-job:\n  image: localhost/mine:1\n"
		s := componentServer(t, ci)
		if code, body := postPipeline(t, s, "acme/app", `{"ref":"main"}`); code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, body)
		}
		j, _ := takeJob(t, s)
		if j.Image.Name != "localhost/mine:1" || len(j.Steps[0].Script) != 1 {
			t.Errorf("job image %q script %q: want the project's image over the component's job, its script kept", j.Image.Name, j.Steps[0].Script)
		}
	})
}

// headSHA is the head commit of a project's default branch.
func (s *Server) headSHA(t *testing.T, path string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(path)
	if !ok {
		t.Fatalf("no project %s", path)
	}
	return p.branches[p.defaultBranch]
}

// An include GitLab cannot resolve refuses the pipeline's creation with
// GitLab's message (Ci::Components::FetchService, the interpolation of the
// component's inputs), and a push pipeline fails with it as yaml_errors.
func TestIncludeComponentErrors(t *testing.T) {
	t.Parallel()
	const fqdn = "{fqdn}"
	const loc = fqdn + "/acme/ci-components/image-build@1.0.0"
	inc := func(component, inputs string) string {
		return "include:\n  - component: " + component + "\n" + inputs
	}
	for _, tc := range []struct{ name, ci, want string }{
		{"unknown component", inc("$CI_SERVER_FQDN/acme/ci-components/nope@1.0.0", ""),
			"Component '" + fqdn + "/acme/ci-components/nope@1.0.0' - content not found"},
		{"unknown version", inc("$CI_SERVER_FQDN/acme/ci-components/image-build@9.9.9", ""),
			"Component '" + fqdn + "/acme/ci-components/image-build@9.9.9' - content not found"},
		{"unknown project", inc("$CI_SERVER_FQDN/acme/nothing/image-build@1.0.0", ""),
			"Component '" + fqdn + "/acme/nothing/image-build@1.0.0' - content not found"},
		{"~latest outside the catalog", inc("$CI_SERVER_FQDN/acme/ci-components/image-build@~latest", ""),
			"Component '" + fqdn + "/acme/ci-components/image-build@~latest' - The ~latest version reference is not supported for non-catalog resources. Use a tag, branch, or commit SHA instead."},
		{"a partial version outside the catalog", inc("$CI_SERVER_FQDN/acme/ci-components/image-build@1", ""),
			"Component '" + fqdn + "/acme/ci-components/image-build@1' - The partial semantic version reference is not supported for non-catalog resources. Use a tag, branch, or commit SHA instead."},
		{"another instance", inc("gitlab.com/acme/ci-components/image-build@1.0.0", ""),
			"Component 'gitlab.com/acme/ci-components/image-build@1.0.0' - the component path is not supported"},
		{"no version", inc("$CI_SERVER_FQDN/acme/ci-components/image-build", ""),
			"Component '" + fqdn + "/acme/ci-components/image-build' - the component path is not supported"},
		{"a required input missing", inc("$CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0", ""),
			"`" + loc + "`: `greeting` input: required value has not been provided"},
		{"an unknown input", inc("$CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0", "    inputs:\n      greeting: hi\n      nope: 1\n      also: 2\n"),
			"`" + loc + "`: unknown input arguments: also, nope"},
		{"a string for a boolean", inc("$CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0", "    inputs:\n      greeting: hi\n      flag: \"true\"\n"),
			"`" + loc + "`: `flag` input: provided value is not a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := componentServer(t, tc.ci)
			u, _ := url.Parse(s.URL)
			msg := strings.ReplaceAll(tc.want, fqdn, u.Host)
			code, body := postPipeline(t, s, "acme/app", `{"ref":"main"}`)
			want := `{"message":{"base":[` + jsonString(msg) + `]}}`
			if code != http.StatusBadRequest || body != want {
				t.Errorf("create = %d %s\nwant 400 %s", code, body, want)
			}
			if n := len(s.Pipelines("acme/app")); n != 0 {
				t.Errorf("%d pipelines after a refusal", n)
			}
			id, err := s.RunPipeline("acme/app", "", "push")
			if err != nil {
				t.Fatal(err)
			}
			_, body = get(t, s, "/projects/acme%2Fapp/pipelines/"+jobPath(id), map[string]string{"PRIVATE-TOKEN": s.Token})
			if !strings.Contains(body, `"status":"failed"`) || !strings.Contains(body, `"yaml_errors":`+jsonString(msg)) {
				t.Errorf("push pipeline: %s", body)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A component of a private project is fetched only for a pipeline whose
// user may read the project's code (Reporter), as GitLab's
// download_code ability decides.
func TestIncludeComponentOfAPrivateProject(t *testing.T) {
	t.Parallel()
	s := componentServer(t, "include:\n  - component: $CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0\n    inputs:\n      greeting: hi\n")
	if err := s.SetVisibility("acme/ci-components", VisibilityPrivate); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVisibility("acme/app", VisibilityPrivate); err != nil {
		t.Fatal(err)
	}
	dev := mustDo[User](t)(s.AddUser("dev"))
	if err := s.AddMember("acme/app", "dev", AccessDeveloper); err != nil {
		t.Fatal(err)
	}
	create := func() (int, string) {
		t.Helper()
		code, _, b := runnerCall(t, s, "POST", "/projects/acme%2Fapp/pipeline",
			map[string]string{"PRIVATE-TOKEN": dev.Token, "Content-Type": "application/json"}, []byte(`{"ref":"main"}`))
		return code, strings.TrimSpace(string(b))
	}
	u, _ := url.Parse(s.URL)
	want := `{"message":{"base":["Component '` + u.Host + `/acme/ci-components/image-build@1.0.0' - project does not exist or you don't have sufficient permissions"]}}`
	if code, body := create(); code != http.StatusBadRequest || body != want {
		t.Errorf("a developer of the app only: %d %s, want 400 %s", code, body, want)
	}
	if err := s.AddMember("acme/ci-components", "dev", AccessReporter); err != nil {
		t.Fatal(err)
	}
	if code, body := create(); code != http.StatusCreated {
		t.Errorf("a reporter of the component project: %d %s, want 201", code, body)
	}
	if pls := s.Pipelines("acme/app"); len(pls) != 1 || pls[0].Username != "dev" {
		t.Errorf("pipelines %+v, want one, dev's", pls)
	}
}
