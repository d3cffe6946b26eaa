package gitlabtest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCIConfig(t *testing.T) {
	cfg, err := parseCIConfig(`spec:
  inputs:
    depsd_action_id:
      default: ""
    depsd_no_cache:
      default: "false"
---
stages: [build, push]
variables:
  GLOBAL: "1"
image: localhost/buildah:latest
default:
  before_script: [echo default]
.hidden:
  script: [never]
push:
  stage: push
  script: echo push
build:
  stage: build
  image:
    name: localhost/other
    entrypoint: [""]
  services:
    - localhost/registry
    - name: localhost/db
      alias: db
  variables:
    GLOBAL: "2"
    OWN: x
  script:
    - buildah build .
    - [echo a, echo b]
    - echo $[[ inputs.depsd_action_id ]] $[[ inputs.depsd_no_cache ]]
  after_script: [echo done]
`, map[string]any{"depsd_action_id": "a-123"})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{cfg.Jobs[0].Name, cfg.Jobs[1].Name}; !reflect.DeepEqual(got, []string{"build", "push"}) {
		t.Errorf("jobs in stage order: got %v", got)
	}
	b := cfg.Jobs[0]
	want := ciJob{
		Name: "build", Stage: "build",
		Image:        ciImage{Name: "localhost/other", Entrypoint: []string{""}},
		Services:     []ciImage{{Name: "localhost/registry"}, {Name: "localhost/db", Alias: "db"}},
		Variables:    [][2]string{{"GLOBAL", "2"}, {"OWN", "x"}},
		BeforeScript: []string{"echo default"},
		Script:       []string{"buildah build .", "echo a", "echo b", "echo a-123 false"},
		AfterScript:  []string{"echo done"},
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("build job:\n got %+v\nwant %+v", b, want)
	}
	if p := cfg.Jobs[1]; p.Image.Name != "localhost/buildah:latest" || !reflect.DeepEqual(p.Variables, [][2]string{{"GLOBAL", "1"}}) {
		t.Errorf("push job does not inherit the globals: %+v", p)
	}
}

func TestParseCIConfigRefusesWhatGitLabWouldRunDifferently(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"build:\n  script: x\n  rules: [{when: never}]\n", "jobs:build config contains unknown keys: rules"},
		{"build:\n  stage: nope\n  script: x\n", "build job: chosen stage nope does not exist"},
		{"build:\n  image: x\n", "jobs:build script can't be blank"},
		{".only_hidden:\n  script: x\n", "jobs config should contain at least one visible job"},
		{"include: other.yml\nbuild:\n  script: x\n", "include: is not supported"},
		{"build: [x]\n", "jobs:build config should be a hash"},
		{"a: [\n", "Invalid configuration format"},
	} {
		_, err := parseCIConfig(tc.src, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseCIConfig(%q) = %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}
