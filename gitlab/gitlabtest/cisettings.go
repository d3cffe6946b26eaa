package gitlabtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Who may pass variables to a new pipeline, as GitLab decides it
// (Ci::PipelineCreation, the :set_pipeline_variables ability; the projects
// API's restrict_user_defined_variables and
// ci_pipeline_variables_minimum_override_role, GitLab 17.1+): without the
// restriction any user who may create the pipeline may; with it, users
// with at least the minimum role, and nobody for no_one_allowed (GitLab.com's
// default for new projects since 17.7).

// Roles of the token's user on a project, and the minimum override roles.
const (
	RoleDeveloper    = "developer"
	RoleMaintainer   = "maintainer"
	RoleOwner        = "owner"
	RoleNoOneAllowed = "no_one_allowed"
)

// accessLevels are GitLab's access levels by role name.
var accessLevels = map[string]int{RoleDeveloper: 30, RoleMaintainer: 40, RoleOwner: 50}

// CISettings are a project's pipeline-variables settings and the token's
// user's role on it. The zero value is GitLab's setting for a project
// created before 17.7 (variables allowed to developers), with the token's
// user a Developer.
type CISettings struct {
	// RestrictUserDefinedVariables: only users with at least
	// MinimumOverrideRole may pass variables.
	RestrictUserDefinedVariables bool
	// MinimumOverrideRole is ci_pipeline_variables_minimum_override_role:
	// no_one_allowed, owner, maintainer or developer. Default developer.
	MinimumOverrideRole string
	// TokenRole is the role of the token's user on the project: developer
	// (default), maintainer or owner. GitLab shows the CI/CD settings in
	// GET /projects/:id only to Maintainers and Owners.
	TokenRole string
}

// RestrictedCISettings is GitLab.com's setting for a project created since
// 17.7: nobody may pass pipeline variables.
func RestrictedCISettings(tokenRole string) CISettings {
	return CISettings{RestrictUserDefinedVariables: true, MinimumOverrideRole: RoleNoOneAllowed, TokenRole: tokenRole}
}

func (c CISettings) withDefaults() CISettings {
	if c.MinimumOverrideRole == "" {
		c.MinimumOverrideRole = RoleDeveloper
	}
	if c.TokenRole == "" {
		c.TokenRole = RoleDeveloper
	}
	return c
}

func (c CISettings) validate() error {
	c = c.withDefaults()
	if _, ok := accessLevels[c.MinimumOverrideRole]; !ok && c.MinimumOverrideRole != RoleNoOneAllowed {
		return fmt.Errorf("unknown minimum override role %q", c.MinimumOverrideRole)
	}
	if _, ok := accessLevels[c.TokenRole]; !ok {
		return fmt.Errorf("unknown token role %q", c.TokenRole)
	}
	return nil
}

// mayPassVariables is GitLab's :set_pipeline_variables for the token's user.
func (c CISettings) mayPassVariables() bool {
	c = c.withDefaults()
	if !c.RestrictUserDefinedVariables {
		return true
	}
	if c.MinimumOverrideRole == RoleNoOneAllowed {
		return false
	}
	return accessLevels[c.TokenRole] >= accessLevels[c.MinimumOverrideRole]
}

// SetCISettings changes a project's pipeline-variables settings and the
// token's user's role on it.
func (s *Server) SetCISettings(projectPath string, c CISettings) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("set CI settings of %s: %w", projectPath, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("set CI settings of %s: project not found", projectPath)
	}
	p.ci = c.withDefaults()
	return nil
}

// Messages GitLab answers a refused create with (400, {"message":{"base":[...]}}).
const (
	// Ci::CreatePipelineService's variables check.
	msgVariablesRefused = "Insufficient permissions to set pipeline variables"
	// Gitlab::Ci::Config::Yaml's interpolator, for inputs given to a
	// configuration without a spec: header.
	msgInputsWithoutSpec = "Given inputs not defined in the `spec` section of the included configuration file"
)

// ciConfigFile is the CI configuration GitLab reads by default.
const ciConfigFile = ".gitlab-ci.yml"

// declaredInputs returns the inputs the CI configuration's header declares
// (spec: inputs:), or hasSpec false when the file has no header.
func declaredInputs(files map[string]string) (inputs map[string]ciInput, hasSpec bool, err error) {
	content, ok := files[ciConfigFile]
	if !ok {
		return nil, false, nil
	}
	h, _, err := splitCIConfig(content)
	if err != nil || !h.hasSpec {
		return nil, false, err
	}
	return h.inputs, true, nil
}

// inputTypes are the input types GitLab knows (Ci::Inputs::Builder::TYPES),
// as its error message lists them.
var inputTypes = []string{"array", "boolean", "number", "string"}

// checkInputs is GitLab's check of the inputs of a new pipeline against
// the CI configuration at the commit: "" when they are accepted, else the
// first error GitLab puts in message.base (Gitlab::Ci::Config::
// Interpolation::Inputs and its BaseInput, Ci::Inputs::BaseInput):
// "unknown input arguments: a, b"; an input of a type GitLab does not
// know; an input declared without a default that is not given ("`name`
// input: required value has not been provided"); a default, or a given
// value, not of the declared type ("`name` input: provided value is not
// a boolean"). A value given as a string is first read as JSON where it
// parses (Ci::PipelineCreation::Inputs.parse_params): "true" is a
// boolean, "1" a number, "[1]" an array, and "a-1" stays a string.
//
// A string input refuses a value that reads as another type ("42"), as
// GitLab's Interpolation::Inputs::StringInput does; later versions turn any
// value into a string. The fake refuses what either refuses.
func checkInputs(files map[string]string, given map[string]any) string {
	declared, hasSpec, err := declaredInputs(files)
	if err != nil {
		return err.Error()
	}
	parsed := make(map[string]any, len(given))
	for k, v := range given {
		parsed[k] = jsonValue(v)
	}
	return checkDeclaredInputs(declared, hasSpec, parsed)
}

// checkDeclaredInputs is checkInputs of values already of their type (a
// pipeline's after reading strings as JSON, an include's as YAML wrote
// them) against what a header declares.
func checkDeclaredInputs(declared map[string]ciInput, hasSpec bool, given map[string]any) string {
	if !hasSpec {
		if len(given) > 0 {
			return msgInputsWithoutSpec
		}
		return ""
	}
	var unknown []string
	for k := range given {
		if _, ok := declared[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		return "unknown input arguments: " + strings.Join(unknown, ", ")
	}
	names := slices.Sorted(maps.Keys(declared))
	for _, name := range names {
		if !slices.Contains(inputTypes, declared[name].typ) {
			return "unknown input specification for `" + name + "` (valid types: " + strings.Join(inputTypes, ", ") + ")"
		}
	}
	for _, name := range names {
		in := declared[name]
		v, ok := given[name]
		switch {
		case !ok && !in.hasDefault:
			return "`" + name + "` input: required value has not been provided"
		case in.hasDefault && !ofInputType(in.typ, in.def):
			return "`" + name + "` input: default value is not " + article(in.typ)
		case ok && !ofInputType(in.typ, v):
			return "`" + name + "` input: provided value is not " + article(in.typ)
		}
	}
	return ""
}

// jsonValue is a given input value as GitLab takes it: a string that
// parses as JSON is the value it holds.
func jsonValue(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	var parsed any
	if err := json.Unmarshal([]byte(s), &parsed); err != nil {
		return s
	}
	return parsed
}

// ofInputType reports whether v (decoded from JSON or YAML) is of the
// input type typ.
func ofInputType(typ string, v any) bool {
	switch v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case float64, int, int64, uint64:
		return typ == "number"
	case []any:
		return typ == "array"
	}
	return false
}

// article is "a boolean", "an array": GitLab's words for the type.
func article(typ string) string {
	if typ == "array" {
		return "an array"
	}
	return "a " + typ
}

// inputBlock is an interpolation block of an input: $[[ inputs.name ]].
var inputBlock = regexp.MustCompile(`\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]`)

// workflowName is the name a new pipeline gets from its configuration's
// workflow:name (inputs interpolated, includes merged); nil without one.
func workflowName(root *yaml.Node) *string {
	n := mapping(mapping(root)["workflow"])["name"]
	if n == nil || n.Kind != yaml.ScalarNode {
		return nil
	}
	name := n.Value
	return &name
}

// refuseCreate writes GitLab's 400 for a pipeline that cannot be created.
func refuseCreate(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string][]string{"base": {msg}}})
}
