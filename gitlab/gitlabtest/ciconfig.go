package gitlabtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ciImage is an image or a service of a job, as .gitlab-ci.yml writes it
// (a name, or a hash with name, alias, entrypoint and command).
type ciImage struct {
	Name       string
	Alias      string
	Entrypoint []string
	Command    []string
}

// ciJob is one job of a pipeline, resolved from the configuration's
// defaults and its own keys.
type ciJob struct {
	Name         string
	Stage        string
	Image        ciImage
	Services     []ciImage
	Variables    [][2]string // in the order GitLab passes them: global, then the job's
	BeforeScript []string
	Script       []string
	AfterScript  []string
}

// ciConfig is the subset of .gitlab-ci.yml the fake runs: stages, global
// variables and defaults (image, services, before_script, after_script,
// also under default:), and jobs with stage, image, services, variables,
// before_script, script and after_script. An optional header document
// (spec: inputs:) declares the inputs interpolated into the rest; a
// commit's include: component: entries are resolved and merged first
// (components.go). Anything else is refused with
// GitLab's "config contains unknown keys" error rather than ignored, so a
// test never runs a pipeline that GitLab would run differently.
type ciConfig struct {
	Stages []string
	Jobs   []ciJob // in stage order, then in file order
}

// ciKeywords are the top-level keys that are not jobs.
var ciKeywords = []string{"stages", "variables", "default", "image", "services", "before_script", "after_script", "workflow", "include", "spec"}

// ciJobKeys are the job keys the fake runs; "tags" and "when" are accepted
// and have no effect on a fake with one runner.
var ciJobKeys = []string{"stage", "image", "services", "variables", "before_script", "script", "after_script", "tags"}

// parseCIConfig reads a .gitlab-ci.yml without includes, with the
// pipeline's inputs interpolated into its values ($[[ inputs.name ]]: the
// given value, else the header's default). Errors read as GitLab's
// yaml_errors do. The server reads a commit's configuration with its
// includes resolved (Server.ciRootAt) and then parses it with parseCIRoot.
func parseCIConfig(src string, inputs map[string]any) (ciConfig, error) {
	root, err := loadCIConfig(src, inputs, true)
	if err != nil {
		return ciConfig{}, err
	}
	if _, ok := mapping(root)["include"]; ok {
		return ciConfig{}, errors.New("include: is not supported here: only a commit's configuration resolves includes")
	}
	return parseCIRoot(root)
}

// loadCIConfig reads a CI configuration file's one document (after its
// header, if any) and interpolates the given inputs into it where it has
// a header (GitLab interpolates nothing in a file without one).
// fromAPI says the values came with a pipeline's creation, where GitLab
// reads a string as JSON where it parses; an include's inputs are YAML
// and keep their types.
func loadCIConfig(src string, given map[string]any, fromAPI bool) (*yaml.Node, error) {
	h, docs, err := splitCIConfig(src)
	if err != nil {
		return nil, err
	}
	if !h.hasSpec && len(docs) == 2 {
		return nil, errors.New("the first document of a file with two must be a header with spec:")
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("a CI configuration has one document (or a spec: header and one), not %d", len(docs))
	}
	root := docs[0]
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("Invalid configuration format")
	}
	if h.hasSpec {
		values := h.defaults()
		for k, v := range given {
			if fromAPI {
				v = jsonValue(v)
			}
			values[k] = v
		}
		if err := interpolateNode(root, values); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// parseCIRoot reads the jobs of a configuration whose inputs are
// interpolated and whose includes are merged into it.
func parseCIRoot(root *yaml.Node) (ciConfig, error) {
	top := mapping(root)
	if _, ok := top["include"]; ok {
		return ciConfig{}, errors.New("include: is not supported by the fake GitLab")
	}
	cfg := ciConfig{Stages: []string{"build", "test", "deploy"}}
	if n, ok := top["stages"]; ok {
		if err := n.Decode(&cfg.Stages); err != nil {
			return ciConfig{}, errors.New("stages config should be an array of strings")
		}
	}
	defaults := ciJob{}
	if err := readJobKeys(&defaults, top, "root"); err != nil {
		return ciConfig{}, err
	}
	if n, ok := top["default"]; ok {
		if err := readJobKeys(&defaults, mapping(n), "default"); err != nil {
			return ciConfig{}, err
		}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		name := root.Content[i].Value
		if slices.Contains(ciKeywords, name) || strings.HasPrefix(name, ".") {
			continue
		}
		body := root.Content[i+1]
		if body.Kind != yaml.MappingNode {
			return ciConfig{}, fmt.Errorf("jobs:%s config should be a hash", name)
		}
		keys := mapping(body)
		var unknown []string
		for k := range keys {
			if !slices.Contains(ciJobKeys, k) {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return ciConfig{}, fmt.Errorf("jobs:%s config contains unknown keys: %s", name, strings.Join(unknown, ", "))
		}
		job := defaults
		job.Name, job.Stage = name, "test"
		job.Variables = slices.Clone(defaults.Variables)
		if n, ok := keys["stage"]; ok {
			job.Stage = n.Value
		}
		if !slices.Contains(cfg.Stages, job.Stage) {
			return ciConfig{}, fmt.Errorf("%s job: chosen stage %s does not exist; available stages are %s", name, job.Stage, strings.Join(cfg.Stages, ", "))
		}
		if err := readJobKeys(&job, keys, "jobs:"+name); err != nil {
			return ciConfig{}, err
		}
		if len(job.Script) == 0 {
			return ciConfig{}, fmt.Errorf("jobs:%s script can't be blank", name)
		}
		cfg.Jobs = append(cfg.Jobs, job)
	}
	if len(cfg.Jobs) == 0 {
		return ciConfig{}, errors.New("jobs config should contain at least one visible job")
	}
	slices.SortStableFunc(cfg.Jobs, func(a, b ciJob) int {
		return slices.Index(cfg.Stages, a.Stage) - slices.Index(cfg.Stages, b.Stage)
	})
	return cfg, nil
}

// ciHeader is what the header document of a CI configuration (spec:
// inputs:) declares.
type ciHeader struct {
	hasSpec bool
	inputs  map[string]ciInput // by name
}

// ciInput is one declared input.
type ciInput struct {
	// typ is its type: as declared (type:), "string" when none is.
	typ        string
	hasDefault bool
	def        any // the default as YAML reads it: string, bool, int, float64, []any, ...
}

// defaults returns the declared inputs' defaults by name.
func (h ciHeader) defaults() map[string]any {
	out := map[string]any{}
	for name, in := range h.inputs {
		if in.hasDefault {
			out[name] = in.def
		}
	}
	return out
}

// splitCIConfig is the one reading of a CI configuration's documents:
// its header, when the first of two or more documents holds spec:, and
// the documents after it (all of them without a header). Every reader
// of .gitlab-ci.yml in the fake (inputs, workflow:name, jobs) starts here.
func splitCIConfig(src string) (ciHeader, []*yaml.Node, error) {
	docs, err := yamlDocuments(src)
	if err != nil {
		return ciHeader{}, nil, err
	}
	var h ciHeader
	if len(docs) < 2 {
		return h, docs, nil
	}
	spec, ok := mapping(docs[0])["spec"]
	if !ok {
		return h, docs, nil
	}
	h.hasSpec, h.inputs = true, map[string]ciInput{}
	for name, decl := range mapping(mapping(spec)["inputs"]) {
		keys := mapping(decl)
		in := ciInput{typ: "string"}
		if t, ok := keys["type"]; ok {
			in.typ = t.Value
		}
		if d, ok := keys["default"]; ok {
			in.hasDefault = true
			if err := d.Decode(&in.def); err != nil {
				in.def = d.Value
			}
		}
		h.inputs[name] = in
	}
	return h, docs[1:], nil
}

// interpolateNode interpolates inputs into every scalar below n, keys
// included, as GitLab's Interpolation::Template does: a scalar that is
// one block and nothing else takes the input's value with its type (a
// boolean stays a boolean, an array becomes a sequence); a block inside
// a longer string is replaced by the value's text. A block naming an
// input the header does not declare is GitLab's "unknown interpolation
// key" error.
func interpolateNode(n *yaml.Node, values map[string]any) error {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "$[[") {
		if m := inputBlock.FindStringSubmatchIndex(n.Value); m != nil && m[0] == 0 && m[1] == len(n.Value) {
			k := n.Value[m[2]:m[3]]
			v, ok := values[k]
			if !ok {
				return fmt.Errorf("unknown interpolation key: `%s`", k)
			}
			setNodeValue(n, v)
			return nil
		}
		var unknown string
		n.Value = inputBlock.ReplaceAllStringFunc(n.Value, func(b string) string {
			k := inputBlock.FindStringSubmatch(b)[1]
			v, ok := values[k]
			if !ok && unknown == "" {
				unknown = k
			}
			return inputText(v)
		})
		if unknown != "" {
			return fmt.Errorf("unknown interpolation key: `%s`", unknown)
		}
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		if err := interpolateNode(c, values); err != nil {
			return err
		}
	}
	return nil
}

// setNodeValue makes n the YAML of an input's value.
func setNodeValue(n *yaml.Node, v any) {
	n.Style = 0
	switch v := v.(type) {
	case []any:
		n.Kind, n.Tag, n.Value, n.Content = yaml.SequenceNode, "!!seq", "", nil
		for _, item := range v {
			c := &yaml.Node{Kind: yaml.ScalarNode}
			setNodeValue(c, item)
			n.Content = append(n.Content, c)
		}
	case bool:
		n.Tag, n.Value = "!!bool", strconv.FormatBool(v)
	case int, int64, uint64:
		n.Tag, n.Value = "!!int", fmt.Sprint(v)
	case float64:
		if v == float64(int64(v)) {
			n.Tag, n.Value = "!!int", strconv.FormatInt(int64(v), 10)
		} else {
			n.Tag, n.Value = "!!float", strconv.FormatFloat(v, 'g', -1, 64)
		}
	case nil:
		n.Tag, n.Value = "!!null", ""
	default:
		n.Tag, n.Value = "!!str", fmt.Sprint(v)
	}
}

// inputText is an input's value inside a longer string.
func inputText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// yamlDocuments splits src into its YAML documents.
func yamlDocuments(src string) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("Invalid configuration format: %v", err)
		}
		if len(doc.Content) == 1 {
			docs = append(docs, doc.Content[0])
		}
	}
}

// mapping returns a mapping node's values by key (nil for another kind).
func mapping(n *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i+1]
	}
	return out
}

// readJobKeys sets the keys a job and the defaults share from keys.
func readJobKeys(job *ciJob, keys map[string]*yaml.Node, where string) error {
	if n, ok := keys["image"]; ok {
		img, err := readImage(n)
		if err != nil {
			return fmt.Errorf("%s:image %w", where, err)
		}
		job.Image = img
	}
	if n, ok := keys["services"]; ok {
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s:services config should be a array", where)
		}
		job.Services = nil
		for _, item := range n.Content {
			svc, err := readImage(item)
			if err != nil {
				return fmt.Errorf("%s:services:service %w", where, err)
			}
			job.Services = append(job.Services, svc)
		}
	}
	if n, ok := keys["variables"]; ok {
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s:variables config should be a hash of key value pairs", where)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s:variables config should be a hash of key value pairs", where)
			}
			if v.Tag != "!!str" && v.Tag != "!!int" {
				// Entry::Variable: a string or an integer (AlphanumericValidator).
				return fmt.Errorf("%s:variables:%s variable definition must be either a string or a hash", where, k)
			}
			job.Variables = slices.DeleteFunc(job.Variables, func(kv [2]string) bool { return kv[0] == k })
			job.Variables = append(job.Variables, [2]string{k, v.Value})
		}
	}
	for key, dst := range map[string]*[]string{"before_script": &job.BeforeScript, "script": &job.Script, "after_script": &job.AfterScript} {
		if n, ok := keys[key]; ok {
			lines, err := readScript(n)
			if err != nil {
				return fmt.Errorf("%s:%s %w", where, key, err)
			}
			*dst = lines
		}
	}
	return nil
}

// readImage reads "name" or {name, alias, entrypoint, command}.
func readImage(n *yaml.Node) (ciImage, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return ciImage{Name: n.Value}, nil
	case yaml.MappingNode:
		var img struct {
			Name       string   `yaml:"name"`
			Alias      string   `yaml:"alias"`
			Entrypoint []string `yaml:"entrypoint"`
			Command    []string `yaml:"command"`
		}
		if err := n.Decode(&img); err != nil || img.Name == "" {
			return ciImage{}, errors.New("config should be a hash or a string")
		}
		return ciImage{Name: img.Name, Alias: img.Alias, Entrypoint: img.Entrypoint, Command: img.Command}, nil
	}
	return ciImage{}, errors.New("config should be a hash or a string")
}

// readScript reads a script: a string, or an array of strings and nested
// arrays of strings (flattened, as GitLab does).
func readScript(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		var out []string
		for _, item := range n.Content {
			switch item.Kind {
			case yaml.ScalarNode:
				out = append(out, item.Value)
			case yaml.SequenceNode:
				lines, err := readScript(item)
				if err != nil {
					return nil, err
				}
				out = append(out, lines...)
			default:
				return nil, errors.New("config should be a string or a nested array of strings up to 10 levels deep")
			}
		}
		return out, nil
	}
	return nil, errors.New("config should be a string or a nested array of strings up to 10 levels deep")
}
