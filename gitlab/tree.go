package gitlab

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// ListFiles reports which of names (paths relative to the repository root,
// such as "Containerfile" or "docker/Dockerfile") exist as files at ref,
// with their blob ids: path → blob id. It lists the repository tree of each
// directory the names are in (GET /projects/:id/repository/tree, 100
// entries a page), so it usually costs one request for names that all sit
// at the root. Blob ids are git's content hashes: an unchanged id means
// unchanged content, and ReadBlob reads exactly the listed version, so all
// files read for one listing come from the same tree.
//
// A ref that does not exist and an empty repository are errors matching
// ErrNotFound (GitLab answers 404 Tree Not Found); a subdirectory that does
// not exist simply holds none of the names.
func (c *Client) ListFiles(ctx context.Context, projectID int64, ref string, names []string) (map[string]string, error) {
	byDir := map[string][]string{}
	var dirs []string
	for _, n := range names {
		n = strings.Trim(n, "/")
		if n == "" {
			continue
		}
		dir := path.Dir(n)
		if dir == "." {
			dir = ""
		}
		if _, ok := byDir[dir]; !ok {
			dirs = append(dirs, dir)
		}
		byDir[dir] = append(byDir[dir], n)
	}
	// The root first: its 404 tells a missing ref from a missing directory.
	slices.SortStableFunc(dirs, func(a, b string) int {
		return boolRank(a != "") - boolRank(b != "")
	})
	found := map[string]string{}
	rootListed := false
	for _, dir := range dirs {
		entries, err := c.listTree(ctx, projectID, ref, dir)
		if errors.Is(err, ErrNotFound) && dir != "" {
			if !rootListed {
				// Without the root listing a 404 may as well mean the ref
				// is gone: ask once to tell.
				if _, rerr := c.listTree(ctx, projectID, ref, ""); rerr != nil {
					return nil, rerr
				}
				rootListed = true
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		rootListed = rootListed || dir == ""
		for _, e := range entries {
			if e.Type == "blob" && slices.Contains(byDir[dir], e.Path) {
				found[e.Path] = e.ID
			}
		}
	}
	return found, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listTree returns every entry of one directory at ref, following
// X-Next-Page.
func (c *Client) listTree(ctx context.Context, projectID int64, ref, dir string) ([]*gl.TreeNode, error) {
	opt := &gl.ListTreeOptions{ListOptions: gl.ListOptions{PerPage: int64(c.cfg.PerPage), Page: 1}, Ref: gl.Ptr(ref)}
	if dir != "" {
		opt.Path = gl.Ptr(dir)
	}
	var all []*gl.TreeNode
	for {
		var page []*gl.TreeNode
		var resp *gl.Response
		err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
			var err error
			page, resp, err = c.gl.Repositories.ListTree(projectID, opt, o...)
			return resp, err
		})
		if err != nil {
			where := "/"
			if dir != "" {
				where = dir
			}
			return nil, fmt.Errorf("list tree %s at %s in project %d: %w", where, ref, projectID, err)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opt.Page = resp.NextPage
	}
}

// ReadBlob returns the content of a blob by its id
// (GET /projects/:id/repository/blobs/:sha/raw); a blob that does not exist
// matches ErrNotFound.
func (c *Client) ReadBlob(ctx context.Context, projectID int64, blobID string) ([]byte, error) {
	var data []byte
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		data, resp, err = c.gl.Repositories.RawBlobContent(projectID, blobID, o...)
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("read blob %s in project %d: %w", blobID, projectID, err)
	}
	return data, nil
}
