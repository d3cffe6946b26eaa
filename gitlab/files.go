package gitlab

import (
	"context"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// ReadFile returns the raw content of a repository file at ref (a branch,
// tag or commit id; pass the HeadCommit from FillHeadCommits so that all
// files of a scan come from the same commit). A missing file, ref or
// project is an error matching errors.Is(err, ErrNotFound); for dependency
// files that is the normal "project declares nothing" case.
func (c *Client) ReadFile(ctx context.Context, projectID int64, path, ref string) ([]byte, error) {
	var data []byte
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		data, resp, err = c.gl.RepositoryFiles.GetRawFile(projectID, path, &gl.GetRawFileOptions{Ref: gl.Ptr(ref)}, o...)
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s at %s in project %d: %w", path, ref, projectID, err)
	}
	return data, nil
}
