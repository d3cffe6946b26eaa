package deps

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// GitLabDepsFile is the name of the explicit dependency file at the root of
// a repository.
const GitLabDepsFile = ".gitlab-deps"

// projectPathPattern is a GitLab full path: a namespace (group/subgroup...)
// and a project, each segment made of letters, digits, '_', '-' and '.',
// not starting with '-' or '.'.
var projectPathPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$`)

// ParseGitLabDeps reads a .gitlab-deps file: one upstream project per line,
// as a path (group/sub/project) or a project URL
// (https://gitlab.example.com/group/project, with optional .git or a
// trailing slash). '#' starts a comment; blank lines are skipped. When
// instanceHost is set, URLs on another host are warnings: depsd only follows
// projects of the instance it watches. Bad lines become warnings with their
// line number; parsing never fails.
func ParseGitLabDeps(file string, src []byte, instanceHost string) FileAnalysis {
	var out FileAnalysis
	src = bytes.TrimPrefix(src, []byte("\ufeff"))
	seen := map[string]int{}
	for i, raw := range strings.Split(string(src), "\n") {
		line := i + 1
		text := stripComment(strings.TrimSpace(strings.TrimSuffix(raw, "\r")))
		if text == "" {
			continue
		}
		warn := func(format string, args ...any) {
			out.Warnings = append(out.Warnings, Warning{File: file, Line: line, Message: fmt.Sprintf(format, args...)})
		}
		if strings.ContainsAny(text, " \t") {
			warn("%q: one project per line", text)
			continue
		}
		project, host, err := parseProjectRef(text)
		if err != nil {
			warn("%q: %v", text, err)
			continue
		}
		if host != "" && instanceHost != "" && !strings.EqualFold(host, instanceHost) {
			warn("%q: project on another GitLab instance (%s), not %s", text, host, instanceHost)
			continue
		}
		if first, dup := seen[strings.ToLower(project)]; dup {
			warn("%q: already listed on line %d", text, first)
			continue
		}
		seen[strings.ToLower(project)] = line
		out.Dependencies = append(out.Dependencies, Dependency{Kind: KindGitLabDeps, Line: line, Ref: text, Project: project})
	}
	return out
}

// stripComment removes a '#' comment: a whole line, or one that follows
// whitespace (so a '#' inside a URL is not taken for one).
func stripComment(s string) string {
	if strings.HasPrefix(s, "#") {
		return ""
	}
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

// parseProjectRef turns a path or a project URL into a project path, and
// the URL's host when there is one. Web URLs of a page inside the project
// (…/project/-/tree/main) name the project too.
func parseProjectRef(ref string) (project, host string, err error) {
	path := ref
	if strings.Contains(ref, "://") {
		u, err := url.Parse(ref)
		if err != nil {
			return "", "", fmt.Errorf("not a URL: %v", err)
		}
		if u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" {
			return "", "", fmt.Errorf("unsupported URL scheme %q", u.Scheme)
		}
		if u.Host == "" {
			return "", "", fmt.Errorf("URL without a host")
		}
		host, path = u.Hostname(), u.Path
		if u.RawQuery != "" || u.Fragment != "" {
			return "", "", fmt.Errorf("URL with a query or fragment is not a project URL")
		}
	} else if at, rest, ok := strings.Cut(ref, ":"); ok && strings.Contains(at, "@") {
		// scp-like git address: git@gitlab.example.com:group/project.git
		host, path = at[strings.IndexByte(at, '@')+1:], rest
	}
	if before, _, ok := strings.Cut(path, "/-/"); ok {
		path = before
	}
	path = strings.Trim(path, "/")
	path = strings.TrimSuffix(path, ".git")
	if !projectPathPattern.MatchString(path) {
		return "", "", fmt.Errorf("not a project path (want group/project or a project URL)")
	}
	for _, seg := range strings.Split(path, "/") {
		if strings.HasSuffix(seg, ".git") || strings.HasSuffix(seg, ".atom") || strings.HasSuffix(seg, ".") {
			return "", "", fmt.Errorf("not a project path: segment %q", seg)
		}
	}
	return path, host, nil
}
