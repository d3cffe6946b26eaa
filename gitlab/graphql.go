package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// MaxFilesBatch is how many projects ReadFilesBatch reads at once: GitLab's
// projects(fullPaths:) takes at most 50.
const MaxFilesBatch = 50

// ErrGraphQLUnsupported: this GitLab's GraphQL API cannot read repository
// files (no GraphQL endpoint, or a Repository type without blobs, before
// GitLab 14): read them through REST.
var ErrGraphQLUnsupported = errors.New("GitLab's GraphQL API cannot read repository files")

// errTooComplex: GitLab refused a query as too complex.
var errTooComplex = errors.New("GraphQL query too complex")

// ProjectBlobs is what one GraphQL request read of one project at one ref.
type ProjectBlobs struct {
	// RootRef is the repository's default branch as GitLab reads blobs at
	// it; empty for an empty repository.
	RootRef string
	// Blobs are those of the names asked for that exist at RootRef, by
	// path.
	Blobs map[string]Blob
	// Err is this project's own failure (a field error: a timeout, the
	// size limit); the caller reads the project through REST instead.
	Err error
}

// Blob is one file read through GraphQL.
type Blob struct {
	ID string // git blob id (oid), as in a REST tree listing
	// Content is the blob's text; Complete is false when GitLab did not
	// give it whole (binary content has no rawTextBlob, a blob past its
	// display limit is cut): read it by ID through ReadBlob.
	Content  []byte
	Complete bool
}

// ReadFilesBatch reads, in one GraphQL request, which of names exist at the
// default branch of each project in paths (at most MaxFilesBatch
// path_with_namespace values) and their content:
//
//	projects(fullPaths: $paths, first: 50) { nodes { fullPath repository {
//	  rootRef blobs(paths: $names) { nodes { path oid size rawTextBlob } } } } }
//
// GitLab prices such a query by its text, not by how many projects it
// returns (see gitlabtest's graphql_complexity.go): 39 for 3 names, three
// more per name. When GitLab refuses it as too complex (many names),
// the names are split and read with one request per part; the part size
// found is kept for the client's later calls. The result is keyed by the
// lower-case path; a project GitLab did not return (not visible, renamed)
// is missing. ErrGraphQLUnsupported when the instance cannot do this.
// ReadBatch also reads followed branches.
func (c *Client) ReadFilesBatch(ctx context.Context, paths, names []string) (map[string]ProjectBlobs, error) {
	ans, err := c.ReadBatch(ctx, BatchQuery{Paths: paths, Names: names})
	if err != nil {
		return nil, err
	}
	return ans.Projects, nil
}

const filesQuery = `query($paths: [String!], $names: [String!]!) {
  projects(fullPaths: $paths, first: 50) {
    nodes { fullPath repository { rootRef blobs(paths: $names) { nodes { path oid size rawTextBlob } } } }
  }
}`

type graphQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// blobsJSON is a blobs connection as the queries select it.
type blobsJSON struct {
	Nodes []struct {
		Path        string  `json:"path"`
		OID         string  `json:"oid"`
		Size        any     `json:"size"` // BigInt: a string
		RawTextBlob *string `json:"rawTextBlob"`
	} `json:"nodes"`
}

// blobs are the connection's blobs by path.
func (bj blobsJSON) blobs() map[string]Blob {
	out := make(map[string]Blob, len(bj.Nodes))
	for _, b := range bj.Nodes {
		blob := Blob{ID: b.OID}
		if b.RawTextBlob != nil {
			blob.Content = []byte(*b.RawTextBlob)
			size, _ := strconv.Atoi(fmt.Sprint(b.Size))
			blob.Complete = len(blob.Content) == size
		}
		out[b.Path] = blob
	}
	return out
}

type filesNodesJSON struct {
	Nodes []struct {
		FullPath   string `json:"fullPath"`
		Repository *struct {
			RootRef *string    `json:"rootRef"`
			Blobs   *blobsJSON `json:"blobs"`
		} `json:"repository"`
	} `json:"nodes"`
}

// graphQLAnswer is an answer whose data fields are decoded by the caller
// (their names are the query's aliases).
type graphQLAnswer struct {
	Data   map[string]json.RawMessage `json:"data"`
	Errors []graphQLError             `json:"errors"`
}

// tooComplexError is GitLab's refusal of a query as too complex, with the
// score it computed and its limit.
type tooComplexError struct {
	score, limit int
	message      string
}

func (e *tooComplexError) Error() string        { return fmt.Sprintf("%v: %s", errTooComplex, e.message) }
func (e *tooComplexError) Is(target error) bool { return target == errTooComplex }

// queryErrors classifies the errors of an answer that concern the whole
// query: an older GitLab (ErrGraphQLUnsupported, or errNoBranchNames when
// only branchNames is missing or takes other arguments), a refusal as too
// complex. Field errors (those with a path) are left to the caller.
func queryErrors(errs []graphQLError) error {
	for _, e := range errs {
		switch {
		case e.Extensions["code"] == "undefinedField" || e.Extensions["code"] == "argumentNotAccepted":
			// A GitLab older than the fields and arguments this reads.
			if e.Extensions["fieldName"] == "branchNames" || e.Extensions["name"] == "branchNames" {
				return fmt.Errorf("%w: %s", errNoBranchNames, e.Message)
			}
			return fmt.Errorf("%w: %s", ErrGraphQLUnsupported, e.Message)
		case strings.HasPrefix(e.Message, "Query has complexity of"):
			tc := &tooComplexError{message: e.Message}
			fmt.Sscanf(e.Message, "Query has complexity of %d, which exceeds max complexity of %d", &tc.score, &tc.limit)
			return tc
		}
	}
	return nil
}

// graphQL sends one query to /api/graphql through the client's limits and
// retries, and decodes the whole answer ({data, errors}) into v. A GitLab
// without the endpoint is ErrGraphQLUnsupported.
func (c *Client) graphQL(ctx context.Context, query string, vars map[string]any, v any) error {
	var raw json.RawMessage
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		resp, err := c.gl.GraphQL.Do(gl.GraphQLQuery{Query: query, Variables: vars}, &raw, o...)
		var ge *gl.GraphQLResponseError
		if errors.As(err, &ge) {
			err = ge.Err
		}
		return resp, err
	})
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && (ae.Status == http.StatusNotFound) {
			return fmt.Errorf("%w: %v", ErrGraphQLUnsupported, err)
		}
		return fmt.Errorf("GitLab GraphQL: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("GitLab GraphQL: decode the answer: %w", err)
	}
	return nil
}
