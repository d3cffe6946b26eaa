package gitlabtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postPipeline sends POST /projects/:id/pipeline with a JSON body.
func postPipeline(t *testing.T, s *Server, project, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.APIURL()+"/projects/"+strings.ReplaceAll(project, "/", "%2F")+"/pipeline", strings.NewReader(body))
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// The answers GitLab documents for a create with variables under each
// setting (doc/ci/variables: "Restrict who can override variables";
// Ci::CreatePipelineService answers 400 with the message in base).
func TestPipelineVariablesSettings(t *testing.T) {
	t.Parallel()
	const refused = `{"message":{"base":["Insufficient permissions to set pipeline variables"]}}`
	withVars := `{"ref":"main","variables":[{"key":"DEPSD_ACTION_ID","value":"a-1","variable_type":"env_var"}]}`
	for _, tc := range []struct {
		name     string
		ci       CISettings
		wantCode int
	}{
		{"not restricted (projects before 17.7)", CISettings{}, 201},
		{"not restricted: the role is disregarded", CISettings{MinimumOverrideRole: RoleNoOneAllowed}, 201},
		{"no_one_allowed refuses even an owner", RestrictedCISettings(RoleOwner), 400},
		{"owner refuses a maintainer", CISettings{RestrictUserDefinedVariables: true, MinimumOverrideRole: RoleOwner, TokenRole: RoleMaintainer}, 400},
		{"maintainer allows a maintainer", CISettings{RestrictUserDefinedVariables: true, MinimumOverrideRole: RoleMaintainer, TokenRole: RoleMaintainer}, 201},
		{"maintainer refuses a developer", CISettings{RestrictUserDefinedVariables: true, MinimumOverrideRole: RoleMaintainer}, 400},
		{"developer allows a developer", CISettings{RestrictUserDefinedVariables: true, MinimumOverrideRole: RoleDeveloper}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			if _, err := s.AddProject(Project{Path: "g/a", Files: map[string]string{"f": "x"}, CI: tc.ci}); err != nil {
				t.Fatal(err)
			}
			code, body := postPipeline(t, s, "g/a", withVars)
			if code != tc.wantCode || (code == 400 && body != refused) {
				t.Fatalf("create with variables = %d %s, want %d", code, body, tc.wantCode)
			}
			// Without variables the create always goes through.
			if code, body := postPipeline(t, s, "g/a", `{"ref":"main"}`); code != 201 {
				t.Fatalf("create without variables = %d %s", code, body)
			}
			if code, _ := postPipeline(t, s, "g/a", `{"ref":"main","variables":[]}`); code != 201 {
				t.Fatalf("create with an empty variables list = %d", code)
			}
		})
	}
}

// GET /projects/:id shows the CI/CD settings to Maintainers and Owners only
// (API::Entities::Project, with_options if admin_project), and the token's
// user's access level in permissions (API::Entities::ProjectWithAccess).
func TestProjectShowsVariablesSettingsToMaintainers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		role      string
		wantShown bool
		wantLevel int
	}{
		{RoleDeveloper, false, 30},
		{RoleMaintainer, true, 40},
		{RoleOwner, true, 50},
	} {
		t.Run(tc.role, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			if _, err := s.AddProject(Project{Path: "g/a", Files: map[string]string{"f": "x"}, CI: RestrictedCISettings(tc.role)}); err != nil {
				t.Fatal(err)
			}
			_, body := get(t, s, "/projects/g%2Fa", map[string]string{"PRIVATE-TOKEN": s.Token})
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			role, shown := got["ci_pipeline_variables_minimum_override_role"]
			restrict, shown2 := got["restrict_user_defined_variables"]
			if shown != tc.wantShown || shown2 != tc.wantShown {
				t.Fatalf("settings shown = %v/%v, want %v: %s", shown, shown2, tc.wantShown, body)
			}
			if shown && (role != "no_one_allowed" || restrict != true) {
				t.Errorf("settings = %v, %v", role, restrict)
			}
			perms, _ := got["permissions"].(map[string]any)
			pa, _ := perms["project_access"].(map[string]any)
			if lvl, _ := pa["access_level"].(float64); int(lvl) != tc.wantLevel {
				t.Errorf("permissions = %v, want access_level %d", got["permissions"], tc.wantLevel)
			}
		})
	}
}

// Pipeline inputs (GitLab 17.10+) are accepted only for inputs the CI
// configuration declares in its spec: header, with GitLab's messages
// (Gitlab::Ci::Config::Interpolation::Inputs, ...::Yaml::Interpolator),
// and only of the declared type: GitLab reads each string value as JSON
// where it can (Ci::PipelineCreation::Inputs.parse_params: "true" is a
// boolean, "1" a number, "[1]" an array, "a-1" a string), then checks
// the value and the default against type: (string when none).
func TestPipelineInputs(t *testing.T) {
	t.Parallel()
	const declared = "spec:\n  inputs:\n    depsd_action_id:\n      default: \"\"\n---\nworkflow:\n  name: 'depsd $[[ inputs.depsd_action_id ]]'\nbuild:\n  script: echo $[[ inputs.depsd_action_id ]]\n"
	const required = "spec:\n  inputs:\n    stage:\n---\nbuild:\n  script: echo\n"
	const typed = "spec:\n  inputs:\n    id:\n      type: string\n      default: ''\n    flag:\n      type: boolean\n      default: false\n" +
		"    count:\n      type: number\n      default: 1\n    list:\n      type: array\n      default: []\n---\n" +
		"workflow:\n  name: 'flag $[[ inputs.flag ]]'\nbuild:\n  script: echo\n"
	typedCI := func(name, decl string) string {
		return "spec:\n  inputs:\n    " + name + ":\n" + decl + "---\nbuild:\n  script: echo\n"
	}
	refused := func(msg string) string { return `{"message":{"base":["` + strings.ReplaceAll(msg, `"`, `\"`) + `"]}}` }
	for _, tc := range []struct {
		name, ci, body string
		wantCode       int
		wantBody       string
		wantName       string
	}{
		{"declared input", declared, `{"ref":"main","inputs":{"depsd_action_id":"a-1"}}`, 201, "", "depsd a-1"},
		{"declared input left to its default", declared, `{"ref":"main"}`, 201, "", "depsd "},
		{"unknown input", declared, `{"ref":"main","inputs":{"depsd_action_id":"a-1","zz":"1","other":"2"}}`, 400,
			`{"message":{"base":["unknown input arguments: other, zz"]}}`, ""},
		{"no spec header", "build:\n  script: echo\n", `{"ref":"main","inputs":{"depsd_action_id":"a-1"}}`, 400,
			"{\"message\":{\"base\":[\"Given inputs not defined in the `spec` section of the included configuration file\"]}}", ""},
		{"no CI file", "", `{"ref":"main","inputs":{"depsd_action_id":"a-1"}}`, 400,
			"{\"message\":{\"base\":[\"Given inputs not defined in the `spec` section of the included configuration file\"]}}", ""},
		{"required input missing", required, `{"ref":"main"}`, 400,
			"{\"message\":{\"base\":[\"`stage` input: required value has not been provided\"]}}", ""},
		{"typed inputs given as JSON in strings", typed, `{"ref":"main","inputs":{"id":"a-1","flag":"true","count":"2","list":"[\"x\"]"}}`, 201, "", "flag true"},
		{"typed inputs given as JSON values", typed, `{"ref":"main","inputs":{"flag":false,"count":2.5,"list":["x"]}}`, 201, "", "flag false"},
		{"typed inputs left to their defaults", typed, `{"ref":"main"}`, 201, "", "flag false"},
		{"1 for a boolean", typed, `{"ref":"main","inputs":{"flag":"1"}}`, 400, refused("`flag` input: provided value is not a boolean"), ""},
		{"yes for a boolean", typed, `{"ref":"main","inputs":{"flag":"yes"}}`, 400, refused("`flag` input: provided value is not a boolean"), ""},
		{"True for a boolean", typed, `{"ref":"main","inputs":{"flag":"True"}}`, 400, refused("`flag` input: provided value is not a boolean"), ""},
		{"a word for a number", typed, `{"ref":"main","inputs":{"count":"two"}}`, 400, refused("`count` input: provided value is not a number"), ""},
		{"a boolean for a number", typed, `{"ref":"main","inputs":{"count":true}}`, 400, refused("`count` input: provided value is not a number"), ""},
		{"a string for an array", typed, `{"ref":"main","inputs":{"list":"x"}}`, 400, refused("`list` input: provided value is not an array"), ""},
		{"a number for a string", typed, `{"ref":"main","inputs":{"id":"42"}}`, 400, refused("`id` input: provided value is not a string"), ""},
		{"a number for an input without type", declared, `{"ref":"main","inputs":{"depsd_action_id":"42"}}`, 400,
			refused("`depsd_action_id` input: provided value is not a string"), ""},
		{"a default of another type", typedCI("flag", "      type: boolean\n      default: 'no'\n"), `{"ref":"main"}`, 400,
			refused("`flag` input: default value is not a boolean"), ""},
		{"an unknown type", typedCI("n", "      type: integer\n      default: 1\n"), `{"ref":"main"}`, 400,
			refused("unknown input specification for `n` (valid types: array, boolean, number, string)"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			files := map[string]string{"f": "x"}
			if tc.ci != "" {
				files[".gitlab-ci.yml"] = tc.ci
			}
			// Inputs go through where variables are refused.
			if _, err := s.AddProject(Project{Path: "g/a", Files: files, CI: RestrictedCISettings("")}); err != nil {
				t.Fatal(err)
			}
			code, body := postPipeline(t, s, "g/a", tc.body)
			if code != tc.wantCode || (tc.wantBody != "" && body != tc.wantBody) {
				t.Fatalf("create = %d %s, want %d %s", code, body, tc.wantCode, tc.wantBody)
			}
			if code != 201 {
				if n := len(s.Pipelines("g/a")); n != 0 {
					t.Errorf("%d pipelines after a refusal", n)
				}
				return
			}
			var got struct {
				Name *string `json:"name"`
			}
			_ = json.Unmarshal([]byte(body), &got)
			if got.Name == nil || *got.Name != tc.wantName {
				t.Errorf("name = %v, want %q", got.Name, tc.wantName)
			}
		})
	}
}

// GET /version and GET /user answer as GitLab documents (doc/api/version.md,
// doc/api/users.md), and pipelines list by username and created_after,
// unless the fake plays a GitLab that ignores the filter.
func TestVersionUserAndPipelineFilters(t *testing.T) {
	t.Parallel()
	s := New(Options{Version: "17.10.0"})
	defer s.Close()
	tok := map[string]string{"PRIVATE-TOKEN": s.Token}
	if _, body := get(t, s, "/version", tok); !strings.Contains(body, `"version":"17.10.0"`) || !strings.Contains(body, `"revision":"`+Revision+`"`) {
		t.Errorf("GET /version = %s", body)
	}
	if resp, _ := get(t, s, "/version", nil); resp.StatusCode != 401 {
		t.Errorf("GET /version without a token = %d, want 401 (authenticated users only)", resp.StatusCode)
	}
	if _, body := get(t, s, "/user", tok); !strings.Contains(body, `"username":"`+TokenUsername+`"`) {
		t.Errorf("GET /user = %s", body)
	}
	if _, err := s.AddProject(Project{Path: "g/a", Files: map[string]string{"f": "x"}}); err != nil {
		t.Fatal(err)
	}
	mine, _ := s.AddPipelineAs("g/a", "main", "api", "created", TokenUsername)
	theirs, _ := s.AddPipelineAs("g/a", "main", "api", "created", "author")
	for _, tc := range []struct {
		query   string
		ignored []string
		want    []int64
	}{
		{"username=" + TokenUsername, nil, []int64{mine}},
		{"username=author", nil, []int64{theirs}},
		{"created_after=2000-01-01T00:00:00Z", nil, []int64{theirs, mine}},
		{"created_after=2999-01-01T00:00:00Z", nil, nil},
		{"created_after=2999-01-01T00:00:00Z", []string{"created_after"}, []int64{theirs, mine}},
		{"created_after=2999-01-01T00:00:00Z&username=author", []string{"created_after"}, []int64{theirs}},
	} {
		s.SetIgnoredPipelineFilters(tc.ignored...)
		_, body := get(t, s, "/projects/g%2Fa/pipelines?"+tc.query, tok)
		var got []struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, p := range got {
			ids = append(ids, p.ID)
		}
		if len(ids) != len(tc.want) || (len(ids) > 0 && (ids[0] != tc.want[0] || ids[len(ids)-1] != tc.want[len(tc.want)-1])) {
			t.Errorf("?%s (ignoring %v) = %v, want %v", tc.query, tc.ignored, ids, tc.want)
		}
	}
}
