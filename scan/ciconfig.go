package scan

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"

	"gitlab.com/depsd/depsd/gitlab"
)

// CIConfigFile is the CI configuration GitLab reads by default.
const CIConfigFile = ".gitlab-ci.yml"

// How a project's pipelines carry depsd's action id: the values of
// chain.PipelineIdent, as Project.PipelineIdent stores them.
const (
	IdentVariables = "variables"
	IdentInputs    = "inputs"
	IdentNone      = "none"
)

// ActionIDInput is the pipeline input depsd passes the action id in.
const ActionIDInput = "depsd_action_id"

// DeclaresActionIDInput reports whether a CI configuration declares the
// depsd_action_id input in its header: a first YAML document holding
// spec: inputs:, followed by the configuration after a --- line (GitLab
// reads a header only in a file of two documents or more).
func DeclaresActionIDInput(content []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var header struct {
		Spec struct {
			Inputs map[string]any `yaml:"inputs"`
		} `yaml:"spec"`
	}
	if err := dec.Decode(&header); err != nil {
		return false
	}
	var rest yaml.Node
	if err := dec.Decode(&rest); errors.Is(err, io.EOF) || err != nil {
		return false
	}
	_, ok := header.Spec.Inputs[ActionIDInput]
	return ok
}

// ciRead is what a scan read of a project's CI configuration.
type ciRead struct {
	read     bool // the configuration was looked at (absent counts)
	declares bool // it declares the depsd_action_id input
}

// identify decides what a scan stores of how a project's pipelines are
// identified, from what the project's settings say of variables from the
// token's user (where GitLab shows them), what was stored, and the CI
// configuration if it was read: variables where they are allowed; where
// they are refused, the input if the configuration declares it, else
// none; a project whose settings GitLab does not show keeps what the
// engine learned, re-checked against its configuration when it changed.
// "" leaves the stored value as it is.
func identify(policy gitlab.VariablesPolicy, prev string, ci ciRead) string {
	refusedBefore := prev == IdentInputs || prev == IdentNone
	switch {
	case policy == gitlab.VariablesAllowed:
		return IdentVariables
	case policy != gitlab.VariablesRefused && !refusedBefore:
		return ""
	case ci.read && ci.declares:
		return IdentInputs
	case ci.read:
		return IdentNone
	case policy == gitlab.VariablesRefused && !refusedBefore:
		// Not read (the project did not change): ask with the input
		// first; the engine falls back to none if GitLab refuses it.
		return IdentInputs
	}
	return ""
}

// needsCI reports whether a scan that reads the project's files should
// read its CI configuration too: only where variables are (or were)
// refused, so the other projects cost no request more.
func needsCI(policy gitlab.VariablesPolicy, prev string) bool {
	return policy == gitlab.VariablesRefused || prev == IdentInputs || prev == IdentNone
}
