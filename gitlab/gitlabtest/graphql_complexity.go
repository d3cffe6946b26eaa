package gitlabtest

import (
	"github.com/vektah/gqlparser/v2/ast"
)

// GitLab's GraphQL limits, as app/graphql/gitlab_schema.rb and
// app/controllers/graphql_controller.rb set them (checked against GitLab's
// source):
//
//   - max complexity: DEFAULT_MAX_COMPLEXITY 200 (anonymous),
//     AUTHENTICATED_MAX_COMPLEXITY 250, ADMIN_MAX_COMPLEXITY 300. A query
//     over it is refused whole, before anything runs, with graphql-ruby's
//     "Query has complexity of N, which exceeds max complexity of M" (HTTP
//     200, no data).
//   - default_max_page_size 100: first/last above it are capped, not
//     refused.
//   - GraphqlController::MAX_QUERY_SIZE 10,000 characters of query text;
//     past it Gitlab::Graphql::Errors::ArgumentError "Query too large",
//     rendered by the controller as HTTP 422 {"errors":[{"message":...}]}.
//   - Resolvers::ProjectsResolver refuses more than 50 fullPaths with an
//     ArgumentError raised in the resolver ("You cannot provide more than
//     50 full_paths"): a field error, projects null, next to the rest of
//     the data.
//
// How GitLab computes complexity (Types::BaseField, Resolvers::BaseResolver,
// Resolvers::BlobsResolver): graphql-ruby's analyzer sums, over the query,
// each field's complexity given its children's. GitLab's BaseField defines
// complexity_for, which graphql-ruby calls before its own connection rule,
// so graphql-ruby's default (connections multiplied by their page size) never
// applies on GitLab. Instead:
//
//   - a field declared with a complexity of its own costs that, plus its
//     children, whether or not it has a resolver (BaseField#field_complexity
//     keeps a positive complexity: argument; complexity_for adds the
//     children): Repository.branchNames is declared with 170;
//   - a field without a resolver costs 1, plus 1 if it calls Gitaly
//     (base_complexity), plus its children;
//   - a field with a resolver costs its children, plus the resolver's
//     resolver_complexity (BaseResolver: 1, +1 with a sort argument, +5 with
//     a search argument; BlobsResolver adds one per path asked for), plus 1
//     if it calls Gitaly; a connection's total then grows by itself times
//     limit × complexity_multiplier, where limit is the smallest of first,
//     last and the page size (100) and the multiplier is BaseResolver's 1 %
//     (0 when the arguments name iid or iids); the result is truncated to an
//     integer.
//
// So a query's complexity depends on its text, never on how many projects
// it returns: projects(fullPaths: [50 paths]) costs the same as with one.
// The estimate of ~1,000 for 50 projects × 3 paths assumed
// graphql-ruby's page-size multiplication, which GitLab overrides.
const (
	complexityAnonymous     = 200
	complexityAuthenticated = 250
	complexityAdmin         = 300
	graphQLMaxPageSize      = 100
	graphQLMaxQuerySize     = 10000
	maxFullPaths            = 50
)

// fieldRule is how GitLab prices one field.
type fieldRule struct {
	resolver   bool // has a resolver class: the resolver_complexity proc applies
	gitaly     bool // calls_gitaly
	connection bool
	perPath    bool // BlobsResolver: one more per path
	constant   int  // the field's declared complexity: this plus its children, nothing else
}

// fieldRules are the fields of the schema subset whose cost is not 1 plus
// their children. Keyed by "Type.field".
var fieldRules = map[string]fieldRule{
	"Query.project":    {resolver: true},                   // Resolvers::ProjectResolver
	"Query.projects":   {resolver: true, connection: true}, // Resolvers::ProjectsResolver
	"Query.group":      {resolver: true},                   // Resolvers::GroupResolver
	"Group.projects":   {resolver: true, connection: true}, // Resolvers::NamespaceProjectsResolver
	"Repository.blobs": {resolver: true, connection: true, gitaly: true, perPath: true},
	// RepositoryType: field :branch_names, calls_gitaly: true, complexity: 170,
	// resolver: Resolvers::RepositoryBranchNamesResolver.
	"Repository.branchNames": {constant: 170},
	"Repository.rootRef":     {gitaly: true},
	"Repository.empty":       {gitaly: true},
	"Repository.exists":      {gitaly: true},
}

// complexity returns GitLab's complexity of an operation's selections.
func complexity(set ast.SelectionSet, vars map[string]any) int {
	total := 0
	for _, f := range collectFields(set) {
		total += fieldComplexity(f, vars)
	}
	return total
}

func fieldComplexity(f *ast.Field, vars map[string]any) int {
	child := complexity(f.SelectionSet, vars)
	if f.ObjectDefinition == nil {
		return 1 + child
	}
	rule := fieldRules[f.ObjectDefinition.Name+"."+f.Name]
	if rule.constant > 0 {
		return rule.constant + child
	}
	if !rule.resolver {
		own := 1
		if rule.gitaly {
			own++
		}
		return own + child
	}
	args := f.ArgumentMap(vars)
	c := float64(child + 1) // BaseResolver.resolver_complexity
	if args["sort"] != nil {
		c++
	}
	if args["search"] != nil {
		c += 5
	}
	if rule.perPath {
		if paths, ok := args["paths"].([]any); ok {
			c += float64(len(paths))
		}
	}
	if rule.gitaly {
		c++
	}
	if rule.connection {
		limit := graphQLMaxPageSize
		for _, k := range []string{"first", "last"} {
			if n, ok := intArg(args[k]); ok && n < limit {
				limit = n
			}
		}
		c += c * float64(limit) * 0.01
	}
	return int(c)
}

// collectFields flattens fragments: every type of the subset is an object
// type, so every fragment applies.
func collectFields(set ast.SelectionSet) []*ast.Field {
	var out []*ast.Field
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			out = append(out, s)
		case *ast.InlineFragment:
			out = append(out, collectFields(s.SelectionSet)...)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				out = append(out, collectFields(s.Definition.SelectionSet)...)
			}
		}
	}
	return out
}

func intArg(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}
