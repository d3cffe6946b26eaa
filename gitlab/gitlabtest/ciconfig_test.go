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

// An input interpolated alone keeps its type, as in GitLab: a boolean
// forwarded to an include's boolean input stays one, and a boolean is no
// variable value (see the refusals below); inside a string it is text.
func TestParseCIConfigInterpolatesWithTypes(t *testing.T) {
	root, err := loadCIConfig("spec:\n  inputs:\n    flag:\n      type: boolean\n      default: false\n    n:\n      type: number\n      default: 2\n    list:\n      type: array\n      default: [a, b]\n---\n"+
		"include:\n  - component: x\n    inputs:\n      flag: $[[ inputs.flag ]]\n      n: $[[ inputs.n ]]\n      list: $[[ inputs.list ]]\n      text: \"f=$[[ inputs.flag ]] n=$[[ inputs.n ]]\"\n",
		map[string]any{"flag": "true"}, true)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Include []struct {
			Inputs map[string]any
		}
	}
	if err := root.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"flag": true, "n": 2, "list": []any{"a", "b"}, "text": "f=true n=2"}
	if !reflect.DeepEqual(got.Include[0].Inputs, want) {
		t.Errorf("interpolated inputs = %#v, want %#v", got.Include[0].Inputs, want)
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
		{"build:\n  variables:\n    FLAG: true\n  script: x\n", "jobs:build:variables:FLAG variable definition must be either a string or a hash"},
		{"spec:\n  inputs:\n    a:\n      default: x\n---\nbuild:\n  script: echo $[[ inputs.b ]]\n", "unknown interpolation key: `b`"},
		{"spec:\n  inputs:\n    flag:\n      type: boolean\n      default: true\n---\nbuild:\n  variables:\n    FLAG: $[[ inputs.flag ]]\n  script: x\n",
			"jobs:build:variables:FLAG variable definition must be either a string or a hash"},
	} {
		_, err := parseCIConfig(tc.src, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseCIConfig(%q) = %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}
