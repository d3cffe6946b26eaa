package webhook

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// paths is a ProjectPath over a map.
type paths map[int64]string

func (p paths) path(id int64) (string, bool) { s, ok := p[id]; return s, ok }

// pipelineOf is the pipeline_success fixture as project id at path.
func pipelineOf(t *testing.T, id, path string) []byte {
	t.Helper()
	b := bytes.Replace(fixture(t, "pipeline_success.json"), []byte(`"id": 7,`), []byte(`"id": `+id+`,`), 1)
	return bytes.Replace(b, []byte(`"path_with_namespace": "containers/base"`), []byte(`"path_with_namespace": "`+path+`"`), 1)
}

// Each hook's secret authenticates the events of its own project (or,
// for a group hook, of the projects depsd scanned below its group), and
// the configured secret itself only while hooks may still carry it.
func TestHookSecretsArePerProject(t *testing.T) {
	var shared atomic.Bool
	scope := paths{7: "containers/base", 8: "grp/app", 10: "GRP/Sub/tool"}
	h, err := NewHandler(Options{Secret: secret, Recorder: &memRecorder{}, Groups: []string{"grp"}, ProjectPath: scope.path,
		Scope: scopeSet{7: true, 8: true, 10: true}, SharedSecretAccepted: shared.Load})
	if err != nil {
		t.Fatal(err)
	}
	base, app, tool, outside := pipelineOf(t, "7", "containers/base"), pipelineOf(t, "8", "grp/app"), pipelineOf(t, "10", "GRP/Sub/tool"), pipelineOf(t, "9", "grp/new")
	group := GroupSecret(secret, "grp")
	// project_id and project.id disagree: which one would the secret be
	// for?
	mixed := []byte(`{"object_kind":"push","project_id":8,"ref":"refs/heads/main","project":{"id":7,"path_with_namespace":"containers/base","default_branch":"main"}}`)
	for _, tc := range []struct {
		name         string
		event, token string
		body         []byte
		code         int
		outcome      string
	}{
		{"its own project's secret", "Pipeline Hook", ProjectSecret(secret, 7), base, 200, OutcomeAccepted},
		{"another project's secret", "Pipeline Hook", ProjectSecret(secret, 8), base, 401, ""},
		{"its group's secret", "Pipeline Hook", group, app, 200, OutcomeAccepted},
		{"its group's secret, a subgroup, other case", "Pipeline Hook", group, tool, 200, OutcomeAccepted},
		{"a group's secret, a project outside it", "Pipeline Hook", group, base, 401, ""},
		{"a group's secret, a project depsd does not manage", "Pipeline Hook", group, outside, 200, OutcomeIgnored},
		{"the configured secret itself", "Pipeline Hook", secret, base, 401, ""},
		{"the secret of project 7, a body naming 8 and 7", "Push Hook", ProjectSecret(secret, 7), mixed, 401, ""},
		{"the secret of project 8, a body naming 8 and 7", "Push Hook", ProjectSecret(secret, 8), mixed, 401, ""},
	} {
		w := send(h, tc.event, tc.token, "k-"+tc.name, tc.body)
		if w.Code != tc.code || (tc.outcome != "" && !strings.Contains(w.Body.String(), `"status":"`+tc.outcome+`"`)) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, w.Code, strings.TrimSpace(w.Body.String()), tc.code, tc.outcome)
		}
	}
	// Hooks installed before per-project secrets carry the configured
	// one: accepted for any project until hooks sync gave each its own.
	shared.Store(true)
	if w := send(h, "Pipeline Hook", secret, "k-shared", base); w.Code != http.StatusOK {
		t.Errorf("the configured secret while hooks may carry it: %d", w.Code)
	}
	if w := send(h, "Pipeline Hook", ProjectSecret(secret, 8), "k-shared-8", base); w.Code != http.StatusUnauthorized {
		t.Errorf("another project's secret while hooks may carry the shared one: %d", w.Code)
	}
}

// hooks.secret_mode: shared: every hook carries the configured secret.
func TestSharedSecretMode(t *testing.T) {
	h, err := NewHandler(Options{Secret: secret, SecretMode: SecretShared, Recorder: &memRecorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]int{"": 401, "x" + secret: 401, secret: 200, ProjectSecret(secret, 8): 401} {
		if w := send(h, "Pipeline Hook", token, "k", fixture(t, "pipeline_success.json")); w.Code != want {
			t.Errorf("token %q: %d, want %d", token, w.Code, want)
		}
	}
	if _, err := NewHandler(Options{Secret: secret, SecretMode: "per-hook", Recorder: &memRecorder{}}); err == nil || !strings.Contains(err.Error(), "per-project or shared") {
		t.Errorf("unknown mode: %v", err)
	}
	if _, err := NewHandler(Options{Secret: secret, Groups: []string{"g"}, Recorder: &memRecorder{}}); err == nil {
		t.Error("group hooks without the projects' paths accepted")
	}
}

func TestDerivedSecrets(t *testing.T) {
	a, b := ProjectSecret("m", 1), ProjectSecret("m", 2)
	if a == b || a == ProjectSecret("n", 1) || len(a) != 64 || strings.Contains(a, "m") && strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("project secrets %q, %q: want 64 hex digits, one per project and master", a, b)
	}
	if GroupSecret("m", "Infra/Images") != GroupSecret("m", "infra/images") || GroupSecret("m", "infra") == ProjectSecret("m", 1) {
		t.Error("group secrets: want one per group, whatever the case of its path")
	}
	if SecretsInstalled("m", SecretPerProject) == SecretsInstalled("m", SecretShared) || SecretsInstalled("m", SecretPerProject) == SecretsInstalled("n", SecretPerProject) {
		t.Error("SecretsInstalled does not follow the master and the mode")
	}
}
