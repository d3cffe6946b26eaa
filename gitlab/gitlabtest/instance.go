package gitlabtest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// instance is the state of the fake GitLab. Every access holds Server.mu.
type instance struct {
	nextID      int64 // shared by groups, projects, hooks: ids only need to be unique per kind
	nextCommit  int64
	nextPipe    int64
	groups      map[int64]*group
	groupPath   map[string]*group // lower-case full path
	projects    map[int64]*project
	projectPath map[string]*project   // lower-case path_with_namespace
	byID        []*project            // projects by id; nil when it must be rebuilt (sortedProjects)
	members     map[string][]*project // groupMembers, valid while byID is
	pipelines   map[int64]*pipeline
}

func newInstance() *instance {
	return &instance{
		nextID:      0,
		nextPipe:    1000,
		groups:      map[int64]*group{},
		groupPath:   map[string]*group{},
		projects:    map[int64]*project{},
		projectPath: map[string]*project{},
		pipelines:   map[int64]*pipeline{},
	}
}

type group struct {
	id        int64
	path      string // full path, e.g. "g/sub"
	parentID  int64
	createdAt time.Time
	hooks     []*hook // group hooks (Premium)
}

type project struct {
	id             int64
	path           string // path_with_namespace
	defaultBranch  string
	archived       bool
	emptyRepo      bool
	sharedWith     []string // lower-case group full paths
	createdAt      time.Time
	lastActivityAt time.Time
	commits        map[string]*commit
	branches       map[string]string // name → commit sha
	hooks          []*hook
	nextIID        int64
	ci             CISettings // with defaults (withDefaults)
	// Tags, protected branches and merge requests (refs.go, mergerequests.go).
	tags      map[string]*tag
	protected []*protectedBranch
	mrs       []*mergeRequest // by iid - 1
	// pipelineMustSucceed is only_allow_merge_if_pipeline_succeeds.
	pipelineMustSucceed bool
}

type commit struct {
	sha       string
	parent    string
	message   string
	files     map[string]string
	createdAt time.Time
	// mergeParent is a merge commit's second parent; "" for others.
	mergeParent string
	// author wrote the commit and pusher pushed it (nil: devUser).
	author *commitAuthorJSON
	pusher *fakeUser
	seq    int64 // creation order
}

func (p *project) namespace() string {
	i := strings.LastIndex(p.path, "/")
	if i < 0 {
		return ""
	}
	return p.path[:i]
}

func (p *project) name() string { return p.path[strings.LastIndex(p.path, "/")+1:] }

// resolve finds the commit a ref (branch name, tag name or full commit
// id, in that order) names.
func (p *project) resolve(ref string) (*commit, bool) {
	if sha, ok := p.branches[ref]; ok {
		return p.commits[sha], true
	}
	if t, ok := p.tags[ref]; ok {
		return p.commits[t.target], true
	}
	c, ok := p.commits[ref]
	return c, ok
}

// sortedProjects returns the projects ordered by id, kept until a project
// is added or deleted: a keyset page of a large instance is then a binary
// search, not a sort.
func (in *instance) sortedProjects() []*project {
	if in.byID == nil {
		in.members = nil
		in.byID = make([]*project, 0, len(in.projects))
		for _, p := range in.projects {
			in.byID = append(in.byID, p)
		}
		slices.SortFunc(in.byID, func(a, b *project) int { return cmp.Compare(a.id, b.id) })
	}
	return in.byID
}

// groupMembers returns the projects of group gpath (lower case) by id: its
// own, its subgroups' with subgroups, those shared with it with shared.
// Kept like sortedProjects: a large group's pages then need no scan of the
// instance each.
func (in *instance) groupMembers(gpath string, subgroups, shared bool) []*project {
	all := in.sortedProjects()
	key := fmt.Sprintf("%s\x00%t\x00%t", gpath, subgroups, shared)
	if list, ok := in.members[key]; ok {
		return list
	}
	prefix := gpath + "/"
	list := []*project{}
	for _, p := range all {
		ns := p.namespace()
		in := strings.EqualFold(ns, gpath) ||
			(subgroups && len(ns) > len(prefix) && strings.EqualFold(ns[:len(prefix)], prefix))
		if in || (shared && slices.Contains(p.sharedWith, gpath)) {
			list = append(list, p)
		}
	}
	if in.members == nil {
		in.members = map[string][]*project{}
	}
	in.members[key] = list
	return list
}

func (in *instance) id() int64 {
	in.nextID++
	return in.nextID
}

func (in *instance) newSHA(seed string) string {
	in.nextCommit++
	sum := sha1.Sum([]byte(seed + "\x00" + strconv.FormatInt(in.nextCommit, 10)))
	return hex.EncodeToString(sum[:])
}

// ensureGroup creates the group and its ancestors as needed.
func (in *instance) ensureGroup(path string, now time.Time) (*group, error) {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil, fmt.Errorf("empty group path")
	}
	if g, ok := in.groupPath[strings.ToLower(path)]; ok {
		return g, nil
	}
	if _, ok := in.projectPath[strings.ToLower(path)]; ok {
		return nil, fmt.Errorf("group %s: a project has this path", path)
	}
	var parentID int64
	if i := strings.LastIndex(path, "/"); i >= 0 {
		parent, err := in.ensureGroup(path[:i], now)
		if err != nil {
			return nil, err
		}
		parentID = parent.id
	}
	g := &group{id: in.id(), path: path, parentID: parentID, createdAt: now}
	in.groups[g.id] = g
	in.groupPath[strings.ToLower(path)] = g
	return g, nil
}

// findProject accepts a numeric id or a path_with_namespace.
func (in *instance) findProject(idOrPath string) (*project, bool) {
	if id, err := strconv.ParseInt(idOrPath, 10, 64); err == nil {
		p, ok := in.projects[id]
		return p, ok
	}
	p, ok := in.projectPath[strings.ToLower(idOrPath)]
	return p, ok
}

func (in *instance) findGroup(idOrPath string) (*group, bool) {
	if id, err := strconv.ParseInt(idOrPath, 10, 64); err == nil {
		g, ok := in.groups[id]
		return g, ok
	}
	g, ok := in.groupPath[strings.ToLower(idOrPath)]
	return g, ok
}

// commitFiles records a commit on branch with files replaced by next.
func (in *instance) commitFiles(p *project, branch string, next map[string]string, message string, now time.Time) *commit {
	parent := p.branches[branch]
	sha := in.newSHA(p.path + "\x00" + branch)
	c := &commit{
		sha:       sha,
		parent:    parent,
		message:   message,
		files:     next,
		createdAt: now,
		seq:       in.nextCommit,
	}
	p.commits[c.sha] = c
	p.branches[branch] = c.sha
	return c
}

func (p *project) headFiles(branch string) map[string]string {
	if c, ok := p.resolve(branch); ok {
		return maps.Clone(c.files)
	}
	return map[string]string{}
}
