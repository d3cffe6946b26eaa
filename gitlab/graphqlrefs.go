package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// BranchNamesPage is how many branch names a batch read takes of each
// project (branchNames' limit). A project with at least as many branches
// matching the batch's pattern is answered with Complete false: its other
// branches are unknown.
const BranchNamesPage = 100

// GitLab's limits on a GraphQL query (app/graphql/gitlab_schema.rb,
// GraphqlController::MAX_QUERY_SIZE; gitlabtest's graphql_complexity.go
// says how GitLab computes complexity): a batch read plans its requests to
// stay within them.
const (
	maxComplexity = 250 // an ordinary user's (an administrator has 300)
	maxQuerySize  = 10000
)

// errNoBranchNames: this GitLab's Repository type has no
// branchNames(searchPattern:, offset:, limit:).
var errNoBranchNames = errors.New("GitLab's GraphQL API cannot list branch names")

// RefsQuery asks a batch read for one project's followed branches: the
// names of its branches and the files at some of them.
type RefsQuery struct {
	Path string // path_with_namespace
	// Patterns are the branches followed: names, or wildcards whose *
	// matches any run of characters (slashes too). GitLab is asked for the
	// names matching their common start (one searchPattern serves every
	// project of a request); the caller matches each name.
	Patterns []string
	// Branches are the branches whose files the batch reads (literal
	// names; they need not exist).
	Branches []string
}

// BatchQuery is a batch read: the files of projects at their default
// branch, and of followed branches.
type BatchQuery struct {
	Paths []string // at most MaxFilesBatch, read at the default branch
	Names []string // file names read at the default branch
	Refs  []RefsQuery
	// RefNames are the file names read at the branches of Refs.
	RefNames []string
}

// ProjectRefs is what a batch read of one project's branches.
type ProjectRefs struct {
	// Branches are the names of the project's branches the batch's
	// pattern matches (the default branch among them, when it does).
	// Complete says they are all of them: GitLab gave fewer than
	// BranchNamesPage.
	Branches []string
	Complete bool
	// Files are, by branch, the blobs of RefNames that exist there, for
	// the branches the read asked for: a branch of RefsQuery.Branches
	// missing here was not asked (GitLab's complexity limit) and must be
	// read another way; one asked that does not exist has no blob.
	Files map[string]map[string]Blob
	// Err is this project's own failure (a field error, or a query GitLab
	// would not take); the caller reads its refs through REST instead.
	Err error
}

// BatchAnswer is what ReadBatch read.
type BatchAnswer struct {
	// Projects are the default branches' files, keyed by lower-case path;
	// a project GitLab did not return is missing.
	Projects map[string]ProjectBlobs
	// Refs are the followed branches, keyed by lower-case path; a project
	// GitLab did not return is missing.
	Refs map[string]ProjectRefs
	// Requests are the GraphQL requests the read took; RefRequests, of
	// them, those that read only branches (refs the first request could
	// not also carry within GitLab's complexity limit).
	Requests, RefRequests int
}

// ReadBatch reads, for each project of q.Paths, the files of q.Names at
// its default branch (as ReadFilesBatch), and for each of q.Refs its branch
// names and the files of q.RefNames at its literal branches, with as few
// GraphQL requests as GitLab's limits allow. The branches ride in the
// default branches' request when they fit:
//
//	refs: projects(fullPaths: $refPaths, first: K) { nodes { fullPath repository {
//	  branchNames(searchPattern: $pattern, offset: 0, limit: 100)
//	  b0: blobs(paths: $refNames, ref: $b0) { nodes { path oid size rawTextBlob } } } } }
//
// branchNames costs 170 on its own (GitLab declares it so), and the
// connection grows by 1 % per project: with the default file names a
// request of 50 default branches carries up to 9 projects' branch names
// and one branch's files, a request of branches alone 29 projects with one
// branch, 16 with two, 6 with three. What does not fit is read by further
// requests of branches alone; a branch whose files do not fit even alone
// is left out of Files. The plan follows GitLab's rules for complexity
// (refsCost); when GitLab still refuses a request, the difference is
// learnt and the rest planned with it. A GitLab without branchNames
// answers each project's refs with Err wrapping ErrGraphQLUnsupported; a
// request of branches alone that fails gives its projects Err. q.Paths
// and q.Refs hold at most MaxFilesBatch each.
func (c *Client) ReadBatch(ctx context.Context, q BatchQuery) (BatchAnswer, error) {
	if len(q.Paths) > MaxFilesBatch || len(q.Refs) > MaxFilesBatch {
		return BatchAnswer{}, fmt.Errorf("read files of %d projects and refs of %d: at most %d each a request", len(q.Paths), len(q.Refs), MaxFilesBatch)
	}
	ans := BatchAnswer{Projects: map[string]ProjectBlobs{}, Refs: map[string]ProjectRefs{}}
	refs := q.Refs
	names := q.Names
	if len(q.Paths) == 0 {
		names = nil
	}
	for len(names) > 0 {
		n := len(names)
		if part := int(c.namesPerQuery.Load()); part > 0 {
			n = min(n, part)
		}
		var chunk refsChunk
		if len(refs) > 0 && !c.noBranchNames.Load() {
			chunk = c.planRefs(refs, len(q.RefNames), mainCost(n))
		}
		err := c.readPart(ctx, q.Paths, names[:n], chunk, q.RefNames, &ans)
		ans.Requests++
		var tc *tooComplexError
		switch {
		case errors.As(err, &tc) && len(chunk.refs) > 0:
			c.learnComplexity(tc, mainCost(n)+chunk.cost)
			continue
		case errors.Is(err, errTooComplex) && n > 1:
			c.namesPerQuery.Store(int64(n / 2))
			c.log.Info("GitLab refused a GraphQL read as too complex; asking for fewer file names at once", "names", n/2)
			continue
		case errors.Is(err, errNoBranchNames):
			c.noBranchNames.Store(true)
			c.log.Info("GitLab's GraphQL API has no branchNames; reading followed branches through REST", "err", err)
			continue
		case err != nil:
			return BatchAnswer{}, err
		}
		names = names[n:]
		refs = refs[len(chunk.refs):]
	}
	refused := 0
	for len(refs) > 0 {
		if c.noBranchNames.Load() {
			for _, r := range refs {
				ans.Refs[strings.ToLower(r.Path)] = ProjectRefs{Err: fmt.Errorf("%w: no branchNames", ErrGraphQLUnsupported)}
			}
			break
		}
		chunk := c.planRefs(refs, len(q.RefNames), 0)
		if len(chunk.refs) == 0 {
			ans.Refs[strings.ToLower(refs[0].Path)] = ProjectRefs{Err: fmt.Errorf("%w: the branch names of one project alone", errTooComplex)}
			refs = refs[1:]
			continue
		}
		err := c.readPart(ctx, nil, nil, chunk, q.RefNames, &ans)
		ans.Requests++
		ans.RefRequests++
		var tc *tooComplexError
		switch {
		case errors.As(err, &tc) && refused < 3:
			refused++
			c.learnComplexity(tc, chunk.cost)
			continue
		case errors.Is(err, errNoBranchNames):
			c.noBranchNames.Store(true)
			c.log.Info("GitLab's GraphQL API has no branchNames; reading followed branches through REST", "err", err)
			continue
		case errors.Is(err, ErrUnauthorized) || ctx.Err() != nil:
			return BatchAnswer{}, err
		case err != nil:
			for _, r := range chunk.refs {
				ans.Refs[strings.ToLower(r.Path)] = ProjectRefs{Err: err}
			}
		}
		refs = refs[len(chunk.refs):]
	}
	return ans, nil
}

// refsChunk is the part of a batch's refs one request carries: the
// projects, the branches whose files it reads (for all of them: one
// field each), the pattern of their names, and its complexity by
// refsCost.
type refsChunk struct {
	refs     []RefsQuery
	branches []string
	pattern  string
	cost     int
}

// planRefs takes as many of refs, in order, as fit in a request whose
// other fields cost used, with the branches of their RefsQuery.Branches:
// the first project alone gets as many of its branches as fit, and a
// project whose branches do not all fit beside the others' joins with
// those already asked, its others being left unread. None when even one
// project's names do not fit.
func (c *Client) planRefs(refs []RefsQuery, names, used int) refsChunk {
	budget := c.complexityBudget() - used
	var chunk refsChunk
	for k, r := range refs {
		branches := union(chunk.branches, r.Branches)
		cost := refsCost(k+1, len(branches), names)
		if cost > budget && k == 0 {
			for len(branches) > 0 && cost > budget {
				branches = branches[:len(branches)-1]
				cost = refsCost(1, len(branches), names)
			}
		}
		if cost > budget && k > 0 {
			branches = chunk.branches
			cost = refsCost(k+1, len(branches), names)
		}
		if cost > budget {
			break
		}
		next := refsChunk{refs: refs[:k+1], branches: branches, pattern: searchPattern(refs[:k+1]), cost: cost}
		if len(refsQueryText(len(next.branches), k+1, used > 0)) > maxQuerySize {
			break
		}
		chunk = next
	}
	return chunk
}

// union is a with b's names that are not in it, sorted.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// complexityBudget is the complexity a planned request may have: GitLab's
// limit (as its last refusal said, else an ordinary user's), less what
// GitLab counted beyond the plan's estimates.
func (c *Client) complexityBudget() int {
	limit := int(c.complexityLimit.Load())
	if limit <= 0 {
		limit = maxComplexity
	}
	return limit - int(c.complexityExtra.Load())
}

// learnComplexity takes GitLab's refusal of a request estimated at
// estimate: its limit, and how much more than estimated it counted.
func (c *Client) learnComplexity(tc *tooComplexError, estimate int) {
	if tc.limit > 0 {
		c.complexityLimit.Store(int64(tc.limit))
	}
	// Otherwise the limit was below the estimate: the new limit replans.
	if extra := tc.score - estimate; extra > 0 {
		c.complexityExtra.Add(int64(extra))
	}
	c.log.Info("GitLab refused a GraphQL read as too complex; planning smaller ones", "score", tc.score, "limit", tc.limit, "estimate", estimate)
}

// searchPattern is the branchNames pattern serving every project of refs:
// a Redis glob matching every name their patterns may match. One literal
// name is asked as it is; otherwise the names' common start, then *.
func searchPattern(refs []RefsQuery) string {
	var pats []string
	for _, r := range refs {
		for _, p := range r.Patterns {
			if !slices.Contains(pats, p) {
				pats = append(pats, p)
			}
		}
	}
	if len(pats) == 1 && !strings.Contains(pats[0], "*") {
		return redisEscape(pats[0])
	}
	var prefix string
	for i, p := range pats {
		lit, _, _ := strings.Cut(p, "*")
		if i == 0 {
			prefix = lit
			continue
		}
		n := 0
		for n < len(prefix) && n < len(lit) && prefix[n] == lit[n] {
			n++
		}
		prefix = prefix[:n]
	}
	return redisEscape(prefix) + "*"
}

// redisEscape escapes what a Redis glob reads as a pattern.
func redisEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The complexity of the queries a batch read sends, by GitLab's rules
// (gitlabtest's graphql_complexity.go; TestBatchQueryComplexity holds
// these to the fake's count of the very queries sent).

// blobsCost: blobs(paths: names) { nodes { path oid size rawTextBlob } }:
// nodes 1 + 4 fields, the resolver 1, one a path, Gitaly 1, doubled by
// the connection (a page of 100 at 1 %).
func blobsCost(names int) int { return 2 * (5 + 1 + names + 1) }

// mainCost: projects(fullPaths:, first: 50) { nodes { fullPath repository
// { rootRef blobs } } }: nodes 1 + fullPath 1 + repository (1, rootRef 2,
// blobs), the resolver 1, × 1.5 (first: 50).
func mainCost(names int) int {
	c := float64(1 + 1 + 1 + 2 + blobsCost(names) + 1)
	return int(c + c*50*0.01)
}

// refsCost: refs: projects(fullPaths:, first: k) { nodes { fullPath
// repository { branchNames b0: blobs ... } } }: nodes 1 + fullPath 1 +
// repository (1, branchNames' declared 170, the blobs), the resolver 1, ×
// (1 + k %).
func refsCost(k, branches, names int) int {
	c := float64(1 + 1 + 1 + 170 + branches*blobsCost(names) + 1)
	return int(c + c*float64(k)*0.01)
}

// filesAtCost: pN: project(fullPath:) { repository { rN: blobs ... } }:
// per project its resolver 1 and repository 1, per ref a blobs field.
func filesAtCost(projects, reads, names int) int {
	return projects*2 + reads*blobsCost(names)
}

const blobFields = `{ nodes { path oid size rawTextBlob } }`

// refsQueryText is the query a batch read sends: the default branches'
// part when withMain, and k projects' refs with their branches' blobs
// fields.
func refsQueryText(branches, k int, withMain bool) string {
	if k == 0 {
		return filesQuery
	}
	var decl []string
	var b strings.Builder
	if withMain {
		decl = append(decl, "$paths: [String!]", "$names: [String!]!")
		b.WriteString("  projects(fullPaths: $paths, first: 50) {\n    nodes { fullPath repository { rootRef blobs(paths: $names) " + blobFields + " } }\n  }\n")
	}
	decl = append(decl, "$refPaths: [String!]", "$pattern: String!")
	if branches > 0 {
		decl = append(decl, "$refNames: [String!]!")
	}
	fmt.Fprintf(&b, "  refs: projects(fullPaths: $refPaths, first: %d) {\n    nodes { fullPath repository {\n      branchNames(searchPattern: $pattern, offset: 0, limit: %d)\n", k, BranchNamesPage)
	for i := range branches {
		decl = append(decl, fmt.Sprintf("$b%d: String", i))
		fmt.Fprintf(&b, "      b%d: blobs(paths: $refNames, ref: $b%d) %s\n", i, i, blobFields)
	}
	b.WriteString("    } }\n  }\n")
	return "query(" + strings.Join(decl, ", ") + ") {\n" + b.String() + "}"
}

// refsNodesJSON is the refs part of an answer: each project's
// repository by field alias.
type refsNodesJSON struct {
	Nodes []struct {
		FullPath   string                     `json:"fullPath"`
		Repository map[string]json.RawMessage `json:"repository"`
	} `json:"nodes"`
}

// readPart sends one request: the default branches of paths for names
// (none when paths is empty), and the chunk's refs; what it read goes into
// ans.
func (c *Client) readPart(ctx context.Context, paths, names []string, chunk refsChunk, refNames []string, ans *BatchAnswer) error {
	withMain := len(paths) > 0 && len(names) > 0
	vars := map[string]any{}
	if withMain {
		vars["paths"], vars["names"] = anys(paths), anys(names)
	}
	if len(chunk.refs) > 0 {
		refPaths := make([]string, len(chunk.refs))
		for i, r := range chunk.refs {
			refPaths[i] = r.Path
		}
		vars["refPaths"], vars["pattern"] = anys(refPaths), chunk.pattern
		if len(chunk.branches) > 0 {
			vars["refNames"] = anys(refNames)
		}
		for i, br := range chunk.branches {
			vars[fmt.Sprint("b", i)] = br
		}
	}
	query := refsQueryText(len(chunk.branches), len(chunk.refs), withMain)
	var raw graphQLAnswer
	if err := c.graphQL(ctx, query, vars, &raw); err != nil {
		return err
	}
	if err := queryErrors(raw.Errors); err != nil {
		return err
	}
	mainErrs, refErrs := map[int]error{}, map[int]error{}
	var refsErr error
	for _, e := range raw.Errors {
		var field string
		if len(e.Path) > 0 {
			field, _ = e.Path[0].(string)
		}
		i, node := -1, len(e.Path) >= 3 && e.Path[1] == "nodes"
		if node {
			if f, ok := e.Path[2].(float64); ok {
				i = int(f)
			}
		}
		switch {
		case field == "projects" && node && i >= 0:
			mainErrs[i] = fmt.Errorf("GitLab GraphQL: %s", e.Message)
		case field == "refs" && node && i >= 0:
			refErrs[i] = fmt.Errorf("GitLab GraphQL: %s", e.Message)
		case field == "refs":
			refsErr = fmt.Errorf("GitLab GraphQL: %s", e.Message)
		default:
			return fmt.Errorf("GitLab GraphQL: %s", e.Message)
		}
	}
	if withMain {
		var main *filesNodesJSON
		if rawMain := raw.Data["projects"]; len(rawMain) > 0 {
			if err := json.Unmarshal(rawMain, &main); err != nil {
				return fmt.Errorf("GitLab GraphQL: decode the answer: %w", err)
			}
		}
		if main == nil {
			return errors.New("GitLab GraphQL: no projects in the answer")
		}
		for i, n := range main.Nodes {
			key := strings.ToLower(n.FullPath)
			pb, seen := ans.Projects[key]
			if !seen {
				pb.Blobs = map[string]Blob{}
			}
			if err := mainErrs[i]; err != nil {
				pb.Err = err
			}
			switch r := n.Repository; {
			case r == nil:
				if pb.Err == nil {
					pb.Err = errors.New("GitLab GraphQL: no repository")
				}
			case r.Blobs == nil:
				if pb.Err == nil {
					pb.Err = errors.New("GitLab GraphQL: no blobs for the repository")
				}
			default:
				if r.RootRef != nil {
					pb.RootRef = *r.RootRef
				}
				for path, b := range r.Blobs.blobs() {
					pb.Blobs[path] = b
				}
			}
			ans.Projects[key] = pb
		}
	}
	if len(chunk.refs) == 0 {
		return nil
	}
	var refs *refsNodesJSON
	if rawRefs := raw.Data["refs"]; len(rawRefs) > 0 {
		if err := json.Unmarshal(rawRefs, &refs); err != nil {
			return fmt.Errorf("GitLab GraphQL: decode the answer: %w", err)
		}
	}
	if refs == nil {
		if refsErr == nil {
			refsErr = errors.New("GitLab GraphQL: no refs in the answer")
		}
		for _, r := range chunk.refs {
			ans.Refs[strings.ToLower(r.Path)] = ProjectRefs{Err: refsErr}
		}
		return nil
	}
	for i, n := range refs.Nodes {
		pr := ProjectRefs{Err: refErrs[i], Files: map[string]map[string]Blob{}}
		if pr.Err == nil && n.Repository == nil {
			pr.Err = errors.New("GitLab GraphQL: no repository")
		}
		if pr.Err == nil {
			var names *[]string
			if err := json.Unmarshal(n.Repository["branchNames"], &names); err != nil || names == nil {
				pr.Err = errors.New("GitLab GraphQL: no branch names")
			} else {
				pr.Branches, pr.Complete = *names, len(*names) < BranchNamesPage
			}
		}
		for k, br := range chunk.branches {
			if pr.Err != nil {
				break
			}
			var bj *blobsJSON
			if err := json.Unmarshal(n.Repository[fmt.Sprint("b", k)], &bj); err != nil || bj == nil {
				pr.Err = fmt.Errorf("GitLab GraphQL: no blobs at %s", br)
				break
			}
			pr.Files[br] = bj.blobs()
		}
		if pr.Err != nil {
			pr = ProjectRefs{Err: pr.Err}
		}
		ans.Refs[strings.ToLower(n.FullPath)] = pr
	}
	return nil
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// FilesAt names a project's files at one of its refs.
type FilesAt struct {
	Path string // path_with_namespace
	Ref  string // a branch or tag
}

// FilesAtAnswer is what ReadFilesAt read.
type FilesAtAnswer struct {
	// Files are, for each read, the blobs of the names that exist at its
	// ref (RootRef empty); a read whose project GitLab did not return, or
	// that failed, has Err. A read missing was not made (a failed
	// request: see the error).
	Files    map[FilesAt]ProjectBlobs
	Requests int
}

// ReadFilesAt reads the files of names at each of reads' refs, with as
// few GraphQL requests as GitLab's complexity limit allows (about 20 a
// ref with the default names, so 11 refs a request):
//
//	p0: project(fullPath: $p0) { repository {
//	  r0: blobs(paths: $names, ref: $r0) { nodes { path oid size rawTextBlob } } } }
//
// A read that does not fit even alone has Err. It stops at the first
// request that fails and returns what it read with the error.
func (c *Client) ReadFilesAt(ctx context.Context, reads []FilesAt, names []string) (FilesAtAnswer, error) {
	ans := FilesAtAnswer{Files: map[FilesAt]ProjectBlobs{}}
	// The reads of a project side by side: one project field for them.
	byPath := map[string][]FilesAt{}
	var order []string
	for _, r := range reads {
		if _, ok := byPath[r.Path]; !ok {
			order = append(order, r.Path)
		}
		if !slices.Contains(byPath[r.Path], r) {
			byPath[r.Path] = append(byPath[r.Path], r)
		}
	}
	var queue []FilesAt
	for _, p := range order {
		queue = append(queue, byPath[p]...)
	}
	refused := 0
	for len(queue) > 0 {
		n := c.planFilesAt(queue, len(names))
		if n == 0 {
			ans.Files[queue[0]] = ProjectBlobs{Err: fmt.Errorf("%w: the files at one ref alone", errTooComplex)}
			queue = queue[1:]
			continue
		}
		err := c.readFilesAtPart(ctx, queue[:n], names, ans.Files)
		ans.Requests++
		var tc *tooComplexError
		switch {
		case errors.As(err, &tc) && refused < 3:
			refused++
			c.learnComplexity(tc, filesAtCost(countPaths(queue[:n]), n, len(names)))
			continue
		case err != nil:
			return ans, err
		}
		queue = queue[n:]
	}
	return ans, nil
}

// planFilesAt is how many of queue's reads, in order, one request holds.
func (c *Client) planFilesAt(queue []FilesAt, names int) int {
	budget := c.complexityBudget()
	n := 0
	for k := 1; k <= len(queue); k++ {
		if filesAtCost(countPaths(queue[:k]), k, names) > budget || len(filesAtQueryText(queue[:k])) > maxQuerySize {
			break
		}
		n = k
	}
	return n
}

func countPaths(reads []FilesAt) int {
	n := 0
	for i, r := range reads {
		if i == 0 || reads[i-1].Path != r.Path {
			n++
		}
	}
	return n
}

// filesAtQueryText is the query of reads (a project's reads side by
// side): project p<i> at $p<i>, its refs' blobs fields r<j> at $r<j>.
func filesAtQueryText(reads []FilesAt) string {
	decl := []string{"$names: [String!]!"}
	var b strings.Builder
	p := -1
	for j, r := range reads {
		if j == 0 || reads[j-1].Path != r.Path {
			if p >= 0 {
				b.WriteString("  } }\n")
			}
			p++
			decl = append(decl, fmt.Sprintf("$p%d: ID!", p))
			fmt.Fprintf(&b, "  p%d: project(fullPath: $p%d) { repository {\n", p, p)
		}
		decl = append(decl, fmt.Sprintf("$r%d: String", j))
		fmt.Fprintf(&b, "    r%d: blobs(paths: $names, ref: $r%d) %s\n", j, j, blobFields)
	}
	b.WriteString("  } }\n")
	return "query(" + strings.Join(decl, ", ") + ") {\n" + b.String() + "}"
}

// readFilesAtPart sends one request for reads.
func (c *Client) readFilesAtPart(ctx context.Context, reads []FilesAt, names []string, out map[FilesAt]ProjectBlobs) error {
	vars := map[string]any{"names": anys(names)}
	proj := make([]int, len(reads)) // the project field of each read
	p := -1
	for j, r := range reads {
		if j == 0 || reads[j-1].Path != r.Path {
			p++
			vars[fmt.Sprint("p", p)] = r.Path
		}
		proj[j] = p
		vars[fmt.Sprint("r", j)] = r.Ref
	}
	var raw graphQLAnswer
	if err := c.graphQL(ctx, filesAtQueryText(reads), vars, &raw); err != nil {
		return err
	}
	if err := queryErrors(raw.Errors); err != nil {
		return err
	}
	projErrs, readErrs := map[string]error{}, map[string]error{}
	for _, e := range raw.Errors {
		var field string
		if len(e.Path) > 0 {
			field, _ = e.Path[0].(string)
		}
		if !strings.HasPrefix(field, "p") {
			return fmt.Errorf("GitLab GraphQL: %s", e.Message)
		}
		err := fmt.Errorf("GitLab GraphQL: %s", e.Message)
		if len(e.Path) >= 3 {
			if alias, ok := e.Path[2].(string); ok {
				readErrs[alias] = err
				continue
			}
		}
		projErrs[field] = err
	}
	for j, r := range reads {
		alias := fmt.Sprint("p", proj[j])
		var repo *struct {
			Repository map[string]json.RawMessage `json:"repository"`
		}
		_ = json.Unmarshal(raw.Data[alias], &repo)
		pb := ProjectBlobs{}
		ra := fmt.Sprint("r", j)
		var bj *blobsJSON
		switch {
		case projErrs[alias] != nil:
			pb.Err = projErrs[alias]
		case readErrs[ra] != nil:
			pb.Err = readErrs[ra]
		case repo == nil:
			pb.Err = fmt.Errorf("GitLab GraphQL: project %s not returned", r.Path)
		case repo.Repository == nil:
			pb.Err = errors.New("GitLab GraphQL: no repository")
		case json.Unmarshal(repo.Repository[ra], &bj) != nil || bj == nil:
			pb.Err = fmt.Errorf("GitLab GraphQL: no blobs at %s", r.Ref)
		default:
			pb.Blobs = bj.blobs()
		}
		out[r] = pb
	}
	return nil
}
