package gitlabtest

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A commit's CI configuration may include CI/CD components of projects
// of the same fake instance, as GitLab resolves them
// (Gitlab::Ci::Config::External::File::Component, Ci::Components::
// FetchService, Gitlab::Ci::Components::InstancePath, Ci::Catalog::
// ComponentsProject):
//
//	include:
//	  - component: $CI_SERVER_FQDN/acme/ci-components/image-build@1.0.0
//	    inputs:
//	      stage: build
//
// The location's variables are expanded (CI_SERVER_FQDN and the other
// instance, project and commit variables, the pipeline's variables); it
// must start with the instance's FQDN and carry a version. The project
// is the path up to the last "/", the component the rest: the file
// templates/<name>.yml, else templates/<name>/template.yml, at the
// version, which is a commit id, else a tag, else a branch (the fake has
// no releases and no CI/CD catalog, so ~latest and partial versions are
// refused as GitLab refuses them for a project outside the catalog). The
// pipeline's user must be allowed to read the project's code (public or
// internal, else Reporter). The component's inputs are checked against
// its spec: header with the messages of a pipeline's inputs, prefixed by
// the location, and interpolated; its configuration is merged under the
// including file's, which wins key by key (mappings merged deeply), as
// Gitlab::Ci::Config::External::Processor does. Other include types and
// includes inside a component are refused as not supported by the fake.

// includeError is a configuration error of an include: GitLab refuses an
// API create with it and fails a push pipeline with it as yaml_errors.
type includeError struct{ msg string }

func (e includeError) Error() string { return e.msg }

// maxIncludes is GitLab's default limit of includes per pipeline.
const maxIncludes = 150

// ciContext is what a commit's configuration is read in: its project and
// commit, the pipeline's user (who must be able to read included
// components) and its ref and variables (for include locations).
type ciContext struct {
	project *project
	sha     string
	ref     string
	user    fakeUser
	vars    []variable
}

// ciRootAt reads the CI configuration of the context's commit for a
// pipeline with these inputs: its header's inputs interpolated, its
// include: component: entries fetched and merged. Callers hold s.mu.
func (s *Server) ciRootAt(cx ciContext, inputs map[string]any) (*yaml.Node, error) {
	c, ok := cx.project.commits[cx.sha]
	if !ok {
		return nil, fmt.Errorf("commit %s not found", cx.sha)
	}
	src, ok := c.files[ciConfigFile]
	if !ok {
		return nil, fmt.Errorf("Missing %s file", ciConfigFile)
	}
	root, err := loadCIConfig(src, inputs, true)
	if err != nil {
		return nil, err
	}
	return s.resolveIncludes(cx, root)
}

// resolveIncludes merges root's includes under it and drops its include
// key. Callers hold s.mu.
func (s *Server) resolveIncludes(cx ciContext, root *yaml.Node) (*yaml.Node, error) {
	inc, ok := mapping(root)["include"]
	if !ok {
		return root, nil
	}
	var entries []*yaml.Node
	switch inc.Kind {
	case yaml.SequenceNode:
		entries = inc.Content
	default:
		entries = []*yaml.Node{inc}
	}
	if len(entries) > maxIncludes {
		return nil, includeError{fmt.Sprintf("Maximum of %d nested includes are allowed!", maxIncludes)}
	}
	merged := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, e := range entries {
		keys := mapping(e)
		comp, ok := keys["component"]
		if e.Kind != yaml.MappingNode || !ok || len(keys) > 2 || (len(keys) == 2 && keys["inputs"] == nil) {
			return nil, includeError{"include: only component: entries (with inputs:) are supported by the fake GitLab"}
		}
		if comp.Kind != yaml.ScalarNode {
			return nil, includeError{fmt.Sprintf("Included file `%s` needs to be a string", comp.Value)}
		}
		var given map[string]any
		if n := keys["inputs"]; n != nil {
			if err := n.Decode(&given); err != nil {
				return nil, includeError{"include:inputs config should be a hash"}
			}
		}
		content, err := s.includeComponent(cx, s.expandIncludeVars(cx, comp.Value), given)
		if err != nil {
			return nil, err
		}
		deepMerge(merged, content)
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "include" {
			out.Content = append(out.Content, root.Content[i], root.Content[i+1])
		}
	}
	deepMerge(merged, out)
	return merged, nil
}

// includeComponent fetches the component at loc (variables expanded) and
// returns its configuration with given interpolated. Callers hold s.mu.
func (s *Server) includeComponent(cx ciContext, loc string, given map[string]any) (*yaml.Node, error) {
	prefix := fmt.Sprintf("Component '%s' -", loc)
	fullPath, version, ok := strings.Cut(loc, "@")
	if !ok || !strings.HasPrefix(fullPath, s.fqdn()+"/") {
		return nil, includeError{prefix + " the component path is not supported"}
	}
	instancePath := strings.TrimPrefix(fullPath, s.fqdn()+"/")
	i := strings.LastIndexByte(instancePath, '/')
	var p *project
	if i > 0 {
		p, _ = s.inst.findProject(instancePath[:i])
	}
	var content string
	found := false
	if p != nil {
		if c := p.componentVersion(version); c != nil {
			if !s.mayDownloadCode(cx.user, p) {
				return nil, includeError{prefix + " project does not exist or you don't have sufficient permissions"}
			}
			if name := instancePath[i+1:]; !strings.Contains(name, "/") {
				for _, path := range []string{"templates/" + name + ".yml", "templates/" + name + "/template.yml"} {
					if content, found = c.files[path]; found {
						break
					}
				}
			}
		}
	}
	switch {
	case found:
	case p != nil && version == "~latest":
		return nil, includeError{prefix + " The ~latest version reference is not supported for non-catalog resources. Use a tag, branch, or commit SHA instead."}
	case p != nil && shorthandSemver.MatchString(version):
		return nil, includeError{prefix + " The partial semantic version reference is not supported for non-catalog resources. Use a tag, branch, or commit SHA instead."}
	default:
		return nil, includeError{prefix + " content not found"}
	}
	h, _, err := splitCIConfig(content)
	if err != nil {
		return nil, includeError{fmt.Sprintf("`%s`: %v", loc, err)}
	}
	if msg := checkDeclaredInputs(h.inputs, h.hasSpec, given); msg != "" {
		return nil, includeError{fmt.Sprintf("`%s`: %s", loc, msg)}
	}
	root, err := loadCIConfig(content, given, false)
	if err != nil {
		return nil, includeError{fmt.Sprintf("`%s`: %v", loc, err)}
	}
	if _, ok := mapping(root)["include"]; ok {
		return nil, includeError{fmt.Sprintf("`%s`: includes inside a component are not supported by the fake GitLab", loc)}
	}
	return root, nil
}

// shorthandSemver is InstancePath's SHORTHAND_SEMVER_PATTERN: "1", "1.2".
var shorthandSemver = regexp.MustCompile(`^\d+(\.\d+)?$`)

// componentVersion is the commit a component version names, in GitLab's
// order: a commit id, a tag, a branch. Nil for none.
func (p *project) componentVersion(version string) *commit {
	if c, ok := p.commits[version]; ok {
		return c
	}
	if t, ok := p.tags[version]; ok {
		return p.commits[t.target]
	}
	if sha, ok := p.branches[version]; ok {
		return p.commits[sha]
	}
	return nil
}

// mayDownloadCode is GitLab's download_code ability of a pipeline's user
// on a component's project: the administrator and the fake's developer
// (who pushes as an Owner of every project) always; others where the
// project is public or internal, or as at least a Reporter. Callers hold
// s.mu.
func (s *Server) mayDownloadCode(u fakeUser, p *project) bool {
	if u.id == botUser.id || u.id == devUser.id || s.visibilityOf(p) != VisibilityPrivate {
		return true
	}
	lvl, _ := s.userAccess(u.id, p)
	return lvl >= AccessReporter
}

// fqdn is the instance's CI_SERVER_FQDN: its host and port.
func (s *Server) fqdn() string {
	u, _ := url.Parse(s.URL)
	return u.Host
}

// includeVar is a variable reference in an include location: $NAME or ${NAME}.
var includeVar = regexp.MustCompile(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))`)

// expandIncludeVars expands the variables an include location may use
// (Gitlab::Ci::Config::External::Mapper::VariablesExpander): the
// instance's, the project's, the commit's and the pipeline's; an unknown
// one expands to nothing, as ExpandVariables.expand does. Callers hold
// s.mu.
func (s *Server) expandIncludeVars(cx ciContext, loc string) string {
	u, _ := url.Parse(s.URL)
	p := cx.project
	vars := map[string]string{
		"CI_SERVER_FQDN": u.Host, "CI_SERVER_HOST": u.Hostname(), "CI_SERVER_PORT": u.Port(),
		"CI_SERVER_URL": s.URL, "CI_SERVER_PROTOCOL": u.Scheme,
		"CI_PROJECT_PATH": p.path, "CI_PROJECT_NAMESPACE": p.namespace(), "CI_PROJECT_NAME": p.name(),
		"CI_DEFAULT_BRANCH": p.defaultBranch, "CI_COMMIT_SHA": cx.sha, "CI_COMMIT_REF_NAME": cx.ref,
	}
	for _, v := range cx.vars {
		vars[v.Key] = v.Value
	}
	return includeVar.ReplaceAllStringFunc(loc, func(m string) string {
		sub := includeVar.FindStringSubmatch(m)
		return vars[sub[1]+sub[2]]
	})
}

// deepMerge merges src into dst, both mappings, as Ruby's deep_merge!
// does: src's value wins, unless both are mappings, which are merged in
// turn. New keys keep src's order after dst's.
func deepMerge(dst, src *yaml.Node) {
	index := map[string]int{}
	for i := 0; i+1 < len(dst.Content); i += 2 {
		index[dst.Content[i].Value] = i
	}
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		j, ok := index[k.Value]
		switch {
		case !ok:
			dst.Content = append(dst.Content, k, v)
			index[k.Value] = len(dst.Content) - 2
		case dst.Content[j+1].Kind == yaml.MappingNode && v.Kind == yaml.MappingNode:
			deepMerge(dst.Content[j+1], v)
		default:
			dst.Content[j+1] = v
		}
	}
}

// ciContextOf is the context of an existing pipeline. Callers hold s.mu.
func (s *Server) ciContextOf(p *project, pl *pipeline) ciContext {
	return ciContext{project: p, sha: pl.sha, ref: pl.ref, user: s.pipelineUser(pl), vars: slices.Clone(pl.vars)}
}

// isIncludeError reports whether err is a configuration error of an include.
func isIncludeError(err error) bool {
	var ie includeError
	return errors.As(err, &ie)
}
