package gitlabtest

import (
	"cmp"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// What a repository's refs are besides branches: tags, the protection of
// branches and what the token's user may do on them, as GitLab decides it
// (Gitlab::UserAccess, Gitlab::Checks::BranchCheck), for the request's
// caller: the server token's role on a project is CISettings.TokenRole, a
// user's its membership (users.go).

// tag is a repository tag: lightweight without a message, annotated with
// one (then it is a tag object of its own, with its own id and date).
type tag struct {
	name      string
	target    string // the commit it points at
	message   string
	objectID  string // the annotated tag object's id; "" when lightweight
	createdAt time.Time
}

// Access levels of protected branches: who may push and merge.
const (
	accessNoOne      = 0
	accessDeveloper  = 30
	accessMaintainer = 40
)

// protectedBranch is a protection rule: a branch name or a wildcard
// (release/*) with the least role that may push and merge.
type protectedBranch struct {
	id             int64
	name           string
	push, merge    int // accessNoOne, accessDeveloper or accessMaintainer
	allowForcePush bool
}

// accessDescription is how GitLab names an access level.
func accessDescription(level int) string {
	switch level {
	case accessNoOne:
		return "No one"
	case accessDeveloper:
		return "Developers + Maintainers"
	}
	return "Maintainers"
}

// actor is who does something on a project: a user and its access level
// there (the request's caller, see actorOf; the developer of the admin
// methods).
type actor struct {
	user  fakeUser
	level int
}

// actorOf is the request's caller on p. Callers hold s.mu.
func (s *Server) actorOf(r *http.Request, p *project) actor {
	c := callerOf(r)
	return actor{user: c.user, level: s.accessLevel(c, p)}
}

// developer is who acts in the admin methods: a person in GitLab's UI
// who may do anything there.
var developer = actor{user: devUser, level: AccessOwner}

// protections returns the rules matching branch.
func (p *project) protections(branch string) []*protectedBranch {
	var out []*protectedBranch
	for _, pb := range p.protected {
		if pb.name == branch || (strings.Contains(pb.name, "*") && branchMatches(pb.name, branch)) {
			out = append(out, pb)
		}
	}
	return out
}

func (p *project) isProtected(branch string) bool { return len(p.protections(branch)) > 0 }

// allowed says whether a user with this access level passes one of the
// rules' levels (pick chooses push or merge); an unprotected branch is
// open to Developers.
func (p *project) allowed(level int, branch string, pick func(*protectedBranch) int) bool {
	rules := p.protections(branch)
	if len(rules) == 0 {
		return level >= accessDeveloper
	}
	for _, pb := range rules {
		if l := pick(pb); l != accessNoOne && level >= l {
			return true
		}
	}
	return false
}

// canPush is Gitlab::UserAccess#can_push_to_branch? for a user with this
// access level.
func (p *project) canPush(level int, branch string) bool {
	return p.allowed(level, branch, func(pb *protectedBranch) int { return pb.push })
}

// canMerge is can_merge_to_branch?: who may merge into branch.
func (p *project) canMerge(level int, branch string) bool {
	return p.allowed(level, branch, func(pb *protectedBranch) int { return pb.merge })
}

// canForcePush: on a protected branch only where a rule allows force
// pushes.
func (p *project) canForcePush(level int, branch string) bool {
	if !p.canPush(level, branch) {
		return false
	}
	rules := p.protections(branch)
	for _, pb := range rules {
		if pb.allowForcePush {
			return true
		}
	}
	return len(rules) == 0
}

// Messages of GitLab's branch checks (Gitlab::Checks::BranchCheck) and of
// the API's push check.
const (
	msgPushRefused            = "You are not allowed to push into this branch"
	msgForcePushProtected     = "You are not allowed to force push code to a protected branch on this project."
	msgDeleteDefaultBranch    = "The default branch of a project cannot be deleted."
	msgDeleteProtectedBranch  = "You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch."
	msgCreateProtectedBranch  = "You are not allowed to create protected branches on this project."
	msgBranchNameInvalid      = "Branch name is invalid"
	msgBranchExists           = "Branch already exists"
	msgTagNameInvalid         = "Tag name invalid"
	msgNotOnBranch            = "You can only create or edit files when you are on a branch"
	msgFileExists             = "A file with this name already exists"
	msgFileMissing            = "A file with this name doesn't exist"
	msgFileChangedSinceEdited = "The file has changed since you started editing it: "
)

// validRefName is Gitlab::GitRefValidator.validate: git's
// check-ref-format rules for a branch or tag name, and none of the names
// GitLab keeps for itself.
func validRefName(name string) bool {
	if name == "" || name == "HEAD" || name == "@" || strings.HasPrefix(name, "-") ||
		strings.HasPrefix(name, "refs/") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") ||
		strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "@{") {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || unicode.IsSpace(r) || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// refSearch is the search of GitLab's branch and tag finders
// (Gitlab::Git::Finders::RefsFinder): case-insensitive; with ^, $ or * a
// pattern (^ anchors the start, $ the end, * matches anything), else a
// substring match with an exact match listed first.
type refSearch struct {
	term  string
	regex *regexp.Regexp
}

func newRefSearch(term string) refSearch {
	if !strings.ContainsAny(term, "^$*") {
		return refSearch{term: term}
	}
	expr := regexp.QuoteMeta(strings.ToLower(term))
	// As GitLab unescapes them: the first ^ and $, every *.
	expr = strings.Replace(expr, `\^`, "^", 1)
	expr = strings.ReplaceAll(expr, `\*`, ".*?")
	expr = strings.Replace(expr, `\$`, "$", 1)
	re, err := regexp.Compile(expr)
	if err != nil {
		re = regexp.MustCompile(`\A\z.`) // matches nothing
	}
	return refSearch{term: term, regex: re}
}

func (rs refSearch) match(name string) bool {
	if rs.term == "" {
		return true
	}
	if rs.regex != nil {
		return rs.regex.MatchString(strings.ToLower(name))
	}
	return strings.Contains(strings.ToLower(name), strings.ToLower(rs.term))
}

// exactFirst moves the name equal to the term (ignoring case) to the
// front, as GitLab does for a plain search.
func exactFirst[T any](rs refSearch, list []T, name func(T) string) []T {
	if rs.term == "" || rs.regex != nil {
		return list
	}
	for i, x := range list {
		if strings.EqualFold(name(x), rs.term) {
			out := append([]T{x}, list[:i]...)
			return append(out, list[i+1:]...)
		}
	}
	return list
}

// versionCompare orders names as git's version:refname sort does: runs of
// digits compare as numbers, the rest byte by byte.
func versionCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(strings.TrimLeft(a[:da], "0")+"0", 10, 64)
			nb, _ := strconv.ParseUint(strings.TrimLeft(b[:db], "0")+"0", 10, 64)
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// refTarget resolves ref as a pipeline's ref: a branch, else a tag.
func (p *project) refTarget(ref string) (sha string, isTag, ok bool) {
	if sha, ok := p.branches[ref]; ok {
		return sha, false, true
	}
	if t, ok := p.tags[ref]; ok {
		return t.target, true, true
	}
	return "", false, false
}

// parents lists a commit's parents, the first first.
func (c *commit) parents() []string {
	var out []string
	if c.parent != "" {
		out = append(out, c.parent)
	}
	if c.mergeParent != "" {
		out = append(out, c.mergeParent)
	}
	return out
}

// ancestors returns the commits reachable from sha, itself included.
func (p *project) ancestors(sha string) map[string]bool {
	seen := map[string]bool{}
	stack := []string{sha}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		c, ok := p.commits[x]
		if !ok || seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, c.parents()...)
	}
	return seen
}

// mergeBase is the nearest common ancestor of a and b ("" when none).
func (p *project) mergeBase(a, b string) string {
	inA := p.ancestors(a)
	queue := []string{b}
	seen := map[string]bool{}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if seen[x] {
			continue
		}
		seen[x] = true
		if inA[x] {
			return x
		}
		if c, ok := p.commits[x]; ok {
			queue = append(queue, c.parents()...)
		}
	}
	return ""
}

// lastCommitFor is the last commit reachable from head that changed
// path, as git log -1 -- path finds it (history simplification: from a
// commit whose file equals one parent's, follow that parent): what GitLab
// reports as a file's last commit and compares a last_commit_id with.
func (p *project) lastCommitFor(head, path string) string {
	c, ok := p.commits[head]
	if !ok {
		return ""
	}
	for {
		cur, has := c.files[path]
		var same *commit
		for _, sha := range c.parents() {
			parent, ok := p.commits[sha]
			if !ok {
				continue
			}
			if old, had := parent.files[path]; had == has && old == cur {
				same = parent
				break
			}
		}
		if same == nil {
			if !has && len(c.parents()) == 0 {
				return ""
			}
			return c.sha
		}
		c = same
	}
}

// commitsBetween lists the commits reachable from head but not from base,
// newest first (a push's new commits).
func (p *project) commitsBetween(base, head string) []*commit {
	if c, ok := p.commits[head]; ok && base != "" && c.parent == base && c.mergeParent == "" {
		return []*commit{c} // a push of one commit: no walk of the history
	}
	old := map[string]bool{}
	if base != "" {
		old = p.ancestors(base)
	}
	var out []*commit
	for sha := range p.ancestors(head) {
		if !old[sha] {
			out = append(out, p.commits[sha])
		}
	}
	sortCommitsNewestFirst(out)
	return out
}

func sortCommitsNewestFirst(list []*commit) {
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && commitNewer(list[j], list[j-1]); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
}

// commitNewer orders by time, then by the order the fake made them (a
// child is always made after its parents).
func commitNewer(a, b *commit) bool {
	if !a.createdAt.Equal(b.createdAt) {
		return a.createdAt.After(b.createdAt)
	}
	return a.seq > b.seq
}
