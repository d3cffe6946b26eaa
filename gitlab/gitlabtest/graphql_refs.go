package gitlabtest

import (
	"slices"
	"strings"
)

// branchNames resolves Repository.branchNames(searchPattern:, offset:,
// limit:) as GitLab does (Resolvers::RepositoryBranchNamesResolver,
// Repositories::BranchNamesFinder): nil (null) for an empty pattern; else
// the branch names matching the pattern as a Redis glob (GitLab searches
// its cached set of branch names with SSCAN MATCH: redisGlob), sorted, the
// default branch moved first, offset dropped and limit taken. ok is false
// for a negative offset or limit, which GitLab's Ruby refuses (an internal
// error).
func (p *project) branchNames(pattern string, offset, limit int) (names []string, ok bool) {
	if pattern == "" {
		return nil, true
	}
	if offset < 0 || limit < 0 {
		return nil, false
	}
	names = []string{}
	for name := range p.branches {
		if name != p.defaultBranch && redisGlob(pattern, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if _, ok := p.branches[p.defaultBranch]; ok && redisGlob(pattern, p.defaultBranch) {
		names = append([]string{p.defaultBranch}, names...)
	}
	names = names[min(offset, len(names)):]
	return names[:min(limit, len(names))], true
}

// redisGlob is Redis's stringmatchlen, which SSCAN's MATCH uses: * any run
// of characters (slashes too), ? one character, [abc], [^abc] and [a-z]
// classes, \ escaping the next character.
func redisGlob(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 1 && pattern[1] == '*' {
				pattern = pattern[1:]
			}
			if len(pattern) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if redisGlob(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			pattern = pattern[1:]
			not := len(pattern) > 0 && pattern[0] == '^'
			if not {
				pattern = pattern[1:]
			}
			match := false
			for len(pattern) > 0 && pattern[0] != ']' {
				switch {
				case pattern[0] == '\\' && len(pattern) >= 2:
					pattern = pattern[1:]
					match = match || pattern[0] == s[0]
				case len(pattern) >= 3 && pattern[1] == '-':
					lo, hi := pattern[0], pattern[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					match = match || (s[0] >= lo && s[0] <= hi)
					pattern = pattern[2:]
				default:
					match = match || pattern[0] == s[0]
				}
				pattern = pattern[1:]
			}
			if len(pattern) == 0 {
				// An unclosed class: Redis stops at the end of the pattern.
				return match != not && len(s) == 1
			}
			if match == not {
				return false
			}
			s = s[1:]
		case '\\':
			if len(pattern) >= 2 {
				pattern = pattern[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != pattern[0] {
				return false
			}
			s = s[1:]
		}
		pattern = pattern[1:]
	}
	return len(s) == 0
}

// validRef is Gitlab::GitRefValidator.validate(ref, skip_head_ref_check:
// true), which BlobsResolver applies to its ref: git's check-ref-format
// rules for a branch or tag name, and no fully qualified refs/heads/ or
// refs/remotes/ name.
func validRef(ref string) bool {
	if ref == "" || ref == "@" || strings.HasPrefix(ref, "-") || strings.HasPrefix(ref, "/") ||
		strings.HasPrefix(ref, "refs/heads/") || strings.HasPrefix(ref, "refs/remotes/") ||
		strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") ||
		strings.ContainsAny(ref, " ~^:?*[\\\x7f") {
		return false
	}
	for _, c := range ref {
		if c < 0x20 {
			return false
		}
	}
	for _, part := range strings.Split(ref, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}
