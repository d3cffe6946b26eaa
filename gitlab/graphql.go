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

// ProjectBlobs is what one GraphQL request read of one project.
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
// returns (see gitlabtest's graphql_complexity.go): about 60 for 3 names,
// two more per name. When GitLab refuses it as too complex (many names),
// the names are split and read with one request per part; the part size
// found is kept for the client's later calls. The result is keyed by the
// lower-case path; a project GitLab did not return (not visible, renamed)
// is missing. ErrGraphQLUnsupported when the instance cannot do this.
func (c *Client) ReadFilesBatch(ctx context.Context, paths, names []string) (map[string]ProjectBlobs, error) {
	if len(paths) > MaxFilesBatch {
		return nil, fmt.Errorf("read files of %d projects: at most %d a request", len(paths), MaxFilesBatch)
	}
	out := map[string]ProjectBlobs{}
	for len(names) > 0 {
		n := len(names)
		if part := int(c.namesPerQuery.Load()); part > 0 {
			n = min(n, part)
		}
		err := c.readFilesPart(ctx, paths, names[:n], out)
		if errors.Is(err, errTooComplex) && n > 1 {
			c.namesPerQuery.Store(int64(n / 2))
			c.log.Info("GitLab refused a GraphQL read as too complex; asking for fewer file names at once", "names", n/2)
			continue
		}
		if err != nil {
			return nil, err
		}
		names = names[n:]
	}
	return out, nil
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

type filesAnswer struct {
	Data *struct {
		Projects *struct {
			Nodes []struct {
				FullPath   string `json:"fullPath"`
				Repository *struct {
					RootRef *string `json:"rootRef"`
					Blobs   *struct {
						Nodes []struct {
							Path        string  `json:"path"`
							OID         string  `json:"oid"`
							Size        any     `json:"size"` // BigInt: a string
							RawTextBlob *string `json:"rawTextBlob"`
						} `json:"nodes"`
					} `json:"blobs"`
				} `json:"repository"`
			} `json:"nodes"`
		} `json:"projects"`
	} `json:"data"`
	Errors []graphQLError `json:"errors"`
}

func (c *Client) readFilesPart(ctx context.Context, paths, names []string, out map[string]ProjectBlobs) error {
	pathVars := make([]any, len(paths))
	for i, p := range paths {
		pathVars[i] = p
	}
	nameVars := make([]any, len(names))
	for i, n := range names {
		nameVars[i] = n
	}
	var ans filesAnswer
	err := c.graphQL(ctx, filesQuery, map[string]any{"paths": pathVars, "names": nameVars}, &ans)
	if err != nil {
		return err
	}
	nodeErrs := map[int]error{}
	for _, e := range ans.Errors {
		switch {
		case e.Extensions["code"] == "undefinedField" || e.Extensions["code"] == "argumentNotAccepted":
			// A GitLab older than the fields and arguments this reads.
			return fmt.Errorf("%w: %s", ErrGraphQLUnsupported, e.Message)
		case strings.HasPrefix(e.Message, "Query has complexity of"):
			return fmt.Errorf("%w: %s", errTooComplex, e.Message)
		case len(e.Path) >= 3 && e.Path[0] == "projects" && e.Path[1] == "nodes":
			if i, ok := e.Path[2].(float64); ok {
				nodeErrs[int(i)] = fmt.Errorf("GitLab GraphQL: %s", e.Message)
			}
		default:
			return fmt.Errorf("GitLab GraphQL: %s", e.Message)
		}
	}
	if ans.Data == nil || ans.Data.Projects == nil {
		return errors.New("GitLab GraphQL: no projects in the answer")
	}
	for i, n := range ans.Data.Projects.Nodes {
		key := strings.ToLower(n.FullPath)
		pb, seen := out[key]
		if !seen {
			pb.Blobs = map[string]Blob{}
		}
		if err := nodeErrs[i]; err != nil {
			pb.Err = err
		}
		if r := n.Repository; r != nil {
			if r.RootRef != nil {
				pb.RootRef = *r.RootRef
			}
			if r.Blobs != nil {
				for _, b := range r.Blobs.Nodes {
					blob := Blob{ID: b.OID}
					if b.RawTextBlob != nil {
						blob.Content = []byte(*b.RawTextBlob)
						size, _ := strconv.Atoi(fmt.Sprint(b.Size))
						blob.Complete = len(blob.Content) == size
					}
					pb.Blobs[b.Path] = blob
				}
			} else if pb.Err == nil {
				pb.Err = errors.New("GitLab GraphQL: no blobs for the repository")
			}
		} else if pb.Err == nil {
			pb.Err = errors.New("GitLab GraphQL: no repository")
		}
		out[key] = pb
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
