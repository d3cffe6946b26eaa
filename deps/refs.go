package deps

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// RefRule says, for the projects it matches, which refs depsd follows
// beside the default branch and which image tags each publishes
// (`refs:` in depsd.yaml, docs/design/nodes.md).
type RefRule struct {
	// Projects are project paths or globs (path.Match: * within a
	// segment).
	Projects []string
	// Branches are the branches followed beside the default branch (which
	// always is): names or wildcards, * matching any run of characters
	// (slashes too), as GitLab's protected-branch wildcards do.
	Branches []string
	// Tags is the glob of release tags ("v*"); empty: tags are not
	// releases.
	Tags string
	// Rebuild is what rebuilding the release-tag node does.
	Rebuild RebuildMode
	// Publish are the templates of what each ref publishes: keyed by a
	// branch name or wildcard, or by TagsRef for the release tags. A ref
	// without templates publishes DefaultPublish's.
	Publish map[string][]string
}

// RebuildMode is what a rebuild of a project released by tags creates.
type RebuildMode string

const (
	// RebuildLatestTag runs a new pipeline on the newest release tag.
	RebuildLatestTag RebuildMode = "latest-tag"
	// RebuildBranch runs a pipeline on the default branch.
	RebuildBranch RebuildMode = "branch"
)

// RefRules are the rules in order; the first matching a project applies.
type RefRules []RefRule

// For returns the rule for project; a project no rule matches follows its
// default branch alone.
func (rs RefRules) For(project string) (RefRule, bool) {
	for _, r := range rs {
		for _, g := range r.Projects {
			if g == project {
				return r, true
			}
			if ok, _ := path.Match(g, project); ok {
				return r, true
			}
		}
	}
	return RefRule{}, false
}

// FollowsBranch reports whether branch is followed beside the default
// branch.
func (r RefRule) FollowsBranch(branch string) bool {
	return slices.ContainsFunc(r.Branches, func(g string) bool { return WildcardMatch(g, branch) })
}

// FollowsTag reports whether tag is a release tag.
func (r RefRule) FollowsTag(tag string) bool { return r.Tags != "" && WildcardMatch(r.Tags, tag) }

// Templates are what a node of kind publishes at branch (for NodeBranch):
// the configured templates of the first Publish key matching it (an exact
// name before a wildcard), else the defaults.
func (r RefRule) Templates(kind NodeKind, branch, defaultBranch string) []string {
	ref := branch
	switch kind {
	case NodeDefault:
		ref = defaultBranch
	case NodeTags:
		ref = TagsRef
	}
	if t, ok := r.Publish[ref]; ok {
		return t
	}
	if kind != NodeTags {
		keys := make([]string, 0, len(r.Publish))
		for k := range r.Publish {
			if k != TagsRef {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if WildcardMatch(k, ref) {
				return r.Publish[k]
			}
		}
	}
	return DefaultPublish(kind, r.Tags != "")
}

// DefaultPublish is what a node publishes when no template says: the
// default branch ":latest" (unless the project releases by tags, whose
// releases then publish it), another branch ":{ref}", release tags
// ":{version}", ":{major}.{minor}", ":{major}" and ":latest".
func DefaultPublish(kind NodeKind, releasesByTags bool) []string {
	switch kind {
	case NodeBranch:
		return []string{"{registry}/{path}:{ref}"}
	case NodeTags:
		return []string{"{registry}/{path}:{version}", "{registry}/{path}:{major}.{minor}", "{registry}/{path}:{major}", "{registry}/{path}:latest"}
	}
	if releasesByTags {
		return nil
	}
	return []string{"{registry}/{path}:latest"}
}

// WildcardMatch matches s against a name with * wildcards, each matching
// any run of characters, slashes included (GitLab's protected-branch
// wildcards).
func WildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// Release is a release tag's version: [v]MAJOR[.MINOR[.PATCH]][-PRE].
type Release struct {
	Tag                 string
	Major, Minor, Patch int
	// Parts is how many of major, minor and patch the tag has.
	Parts int
	Pre   string
}

var releaseRE = regexp.MustCompile(`^[vV]?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?$`)

// ParseRelease reads a tag's version; ok is false for a tag that is not
// a version.
func ParseRelease(tag string) (Release, bool) {
	m := releaseRE.FindStringSubmatch(tag)
	if m == nil {
		return Release{}, false
	}
	r := Release{Tag: tag, Pre: m[4], Parts: 1}
	r.Major, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		r.Minor, _ = strconv.Atoi(m[2])
		r.Parts = 2
	}
	if m[3] != "" {
		r.Patch, _ = strconv.Atoi(m[3])
		r.Parts = 3
	}
	return r, true
}

// Version is the release's version without its v: "3.2.1", "3.2.1-rc.1".
func (r Release) Version() string {
	v := strconv.Itoa(r.Major)
	if r.Parts >= 2 {
		v += "." + strconv.Itoa(r.Minor)
	}
	if r.Parts == 3 {
		v += "." + strconv.Itoa(r.Patch)
	}
	if r.Pre != "" {
		v += "-" + r.Pre
	}
	return v
}

// compareReleases orders releases by version (a pre-release before its
// release), then by tag.
func compareReleases(a, b Release) int {
	if c := cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Minor, b.Minor), cmp.Compare(a.Patch, b.Patch)); c != 0 {
		return c
	}
	if (a.Pre == "") != (b.Pre == "") {
		if a.Pre == "" {
			return 1
		}
		return -1
	}
	return cmp.Or(strings.Compare(a.Pre, b.Pre), strings.Compare(a.Tag, b.Tag))
}

// LatestRelease is the newest of tags that match glob and are versions,
// pre-releases left out: what the release-tag node builds and publishes.
func LatestRelease(tags []string, glob string) (Release, bool) {
	var best Release
	found := false
	for _, t := range tags {
		if glob != "" && !WildcardMatch(glob, t) {
			continue
		}
		r, ok := ParseRelease(t)
		if !ok || r.Pre != "" {
			continue
		}
		if !found || compareReleases(r, best) > 0 {
			best, found = r, true
		}
	}
	return best, found
}

// publishPlaceholders are the placeholders of a publish template, and
// the kinds of node each may be used on.
var publishPlaceholders = map[string]bool{ // placeholder → only on release tags
	"{registry}": false, "{path}": false, "{ref}": false,
	"{tag}": true, "{version}": true, "{major}": true, "{minor}": true, "{patch}": true,
}

// CheckPublishTemplate says what is wrong with a template for a node of
// kind: an unknown placeholder, a release part on a branch, or no tag.
func CheckPublishTemplate(tmpl string, kind NodeKind) error {
	for _, m := range placeholderRE.FindAllString(tmpl, -1) {
		tagOnly, ok := publishPlaceholders[m]
		if !ok {
			return fmt.Errorf("unknown placeholder %s: want {registry}, {path}, {ref}, {tag}, {version}, {major}, {minor} or {patch}", m)
		}
		if tagOnly && kind != NodeTags {
			return fmt.Errorf("%s is a part of a release tag: a branch has none", m)
		}
	}
	if !strings.Contains(tmpl[strings.LastIndex(tmpl, "/")+1:], ":") {
		return fmt.Errorf("%q names no tag (want host/path:tag)", tmpl)
	}
	return nil
}

var placeholderRE = regexp.MustCompile(`\{[^}]*\}`)

// TagSafe makes a ref usable as an image tag: characters a tag cannot hold
// (a slash, say) become '-', and a leading '.' or '-' becomes '_'; at most
// 128 characters.
func TagSafe(ref string) string {
	b := []byte(ref)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 0 && (b[0] == '.' || b[0] == '-') {
		b[0] = '_'
	}
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// PublishPattern matches the image references a template gives for one
// node: a release part matches any value of its shape, so that
// "{registry}/{path}:{major}" of a tag node matches "…/base:3" whichever
// release is the latest.
//
// Its regular expression is compiled when it is first matched: a scan
// makes a pattern for every node of every project (NewNodeResolver), but
// matches only those of the projects downstreams build on, and compiling
// all of them was most of a rescan's CPU (some 8 KB and tens of µs each).
type PublishPattern struct {
	re *lazyRegexp
}

// lazyRegexp compiles src once, when first asked.
type lazyRegexp struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() {
		// src quotes every literal part and adds fixed classes, so it
		// always compiles (TestPublishPatternsCompile); if it did not,
		// the pattern would match nothing.
		l.re, _ = regexp.Compile(l.src)
	})
	return l.re
}

// CompilePublish compiles tmpl for the node of kind at branch (NodeBranch
// only) of the project whose registry prefix is prefix (host/path).
func CompilePublish(tmpl, prefix string, kind NodeKind, branch string) (PublishPattern, error) {
	if err := CheckPublishTemplate(tmpl, kind); err != nil {
		return PublishPattern{}, err
	}
	host, p, _ := strings.Cut(strings.Trim(prefix, "/"), "/")
	if strings.Contains(tmpl, "{registry}") && host == "" || strings.Contains(tmpl, "{path}") && p == "" {
		return PublishPattern{}, fmt.Errorf("%q: the project has no container registry", tmpl)
	}
	var b strings.Builder
	b.WriteString("^")
	rest := tmpl
	for {
		loc := placeholderRE.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(strings.ToLower(rest)))
			break
		}
		b.WriteString(regexp.QuoteMeta(strings.ToLower(rest[:loc[0]])))
		switch rest[loc[0]:loc[1]] {
		case "{registry}":
			b.WriteString(regexp.QuoteMeta(strings.ToLower(host)))
		case "{path}":
			b.WriteString(regexp.QuoteMeta(strings.ToLower(p)))
		case "{ref}":
			if kind == NodeTags {
				b.WriteString(`[vV]?\d+(?:\.\d+){0,2}`)
			} else {
				b.WriteString(regexp.QuoteMeta(TagSafe(branch)))
			}
		case "{tag}":
			b.WriteString(`[vV]?\d+(?:\.\d+){0,2}`)
		case "{version}":
			b.WriteString(`\d+(?:\.\d+){0,2}`)
		case "{major}", "{minor}", "{patch}":
			b.WriteString(`\d+`)
		}
		rest = rest[loc[1]:]
	}
	b.WriteString("$")
	return PublishPattern{re: &lazyRegexp{src: b.String()}}, nil
}

// Matches reports whether image (host/path:tag, normalised) is one the
// template gives. Hosts and paths compare case-insensitively; the tag is
// compared as written except for a branch's name, made TagSafe.
func (p PublishPattern) Matches(image string) bool {
	repo, tag, ok := cutTag(image)
	if !ok {
		return false
	}
	if p.re == nil {
		return false
	}
	re := p.re.get()
	return re != nil && re.MatchString(strings.ToLower(repo)+":"+tag)
}

// ExpandPublish gives the reference tmpl names for a node: at branch
// (NodeBranch), or at release rel (NodeTags).
func ExpandPublish(tmpl, prefix string, kind NodeKind, branch string, rel Release) (string, error) {
	if err := CheckPublishTemplate(tmpl, kind); err != nil {
		return "", err
	}
	host, p, _ := strings.Cut(strings.Trim(prefix, "/"), "/")
	if strings.Contains(tmpl, "{registry}") && host == "" || strings.Contains(tmpl, "{path}") && p == "" {
		return "", fmt.Errorf("%q: the project has no container registry", tmpl)
	}
	ref := TagSafe(branch)
	if kind == NodeTags {
		ref = rel.Tag
	}
	r := strings.NewReplacer("{registry}", host, "{path}", p, "{ref}", ref, "{tag}", rel.Tag,
		"{version}", rel.Version(), "{major}", strconv.Itoa(rel.Major), "{minor}", strconv.Itoa(rel.Minor), "{patch}", strconv.Itoa(rel.Patch))
	img, err := NormalizeImage(r.Replace(tmpl))
	if err != nil {
		return "", err
	}
	return img.Image, nil
}

// cutTag splits host/path:tag into its repository and tag.
func cutTag(image string) (repo, tag string, ok bool) {
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", "", false
	}
	return image[:i], image[i+1:], true
}
