package scan

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// batchReader reads the dependency files of up to gitlab.MaxFilesBatch
// projects with one GraphQL request, and gives each project the files
// readFiles would have given it: the same names chosen, the same blob ids,
// so the same version digest (a project read one way and rescanned the
// other is not read again).
type batchReader struct {
	gl             GitLab
	br             BatchReader
	blobs          *blobCache
	names          []string // Containerfiles then .gitlab-deps
	containerfiles []string
	listed         []gitlab.Project
	logger         *slog.Logger
}

// read reads the projects listed[i], i in batch, and passes each one's
// result to done. A project the GraphQL answer does not serve (missing,
// its own field error, a default branch other than the listed one) is read
// through REST by rest. When the request itself fails the whole batch is
// read through REST, except that ErrGraphQLUnsupported is returned when
// giveUp is set (the scan then reads everything through REST).
func (b batchReader) read(ctx context.Context, batch []int, giveUp bool, rest func(context.Context, int) error,
	done func(i int, files []File, version string, read int, err error) error) error {
	paths := make([]string, len(batch))
	for k, i := range batch {
		paths[k] = b.listed[i].Path
	}
	got, err := b.br.ReadFilesBatch(ctx, paths, b.names)
	switch {
	case err == nil:
	case giveUp && errors.Is(err, gitlab.ErrGraphQLUnsupported):
		return err
	case errors.Is(err, gitlab.ErrUnauthorized) || ctx.Err() != nil:
		return err
	default:
		b.logger.Warn("GraphQL read failed; reading these projects through REST", "projects", len(batch), "err", err)
		for _, i := range batch {
			if err := rest(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	for _, i := range batch {
		lp := b.listed[i]
		pb, ok := got[strings.ToLower(lp.Path)]
		switch {
		case !ok || pb.Err != nil || (pb.RootRef != "" && pb.RootRef != lp.DefaultBranch):
			if pb.Err != nil {
				b.logger.Debug("GraphQL could not read a project; reading it through REST", "project", lp.Path, "err", pb.Err)
			}
			err = rest(ctx, i)
		case pb.RootRef == "":
			err = done(i, nil, "", 0, fmt.Errorf("repository of %s is empty: %w", lp.Path, gitlab.ErrNotFound))
		default:
			files, version, read, ferr := b.files(ctx, lp, pb)
			err = done(i, files, version, read, ferr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// files chooses and completes a project's files from a GraphQL answer as
// readFiles does from a tree listing: the first Containerfile name present
// and .gitlab-deps; a blob GraphQL did not give whole (binary, cut) is read
// by id through REST.
func (b batchReader) files(ctx context.Context, lp gitlab.Project, pb gitlab.ProjectBlobs) ([]File, string, int, error) {
	var chosen []string
	for _, name := range b.containerfiles {
		if _, ok := pb.Blobs[strings.Trim(name, "/")]; ok {
			chosen = append(chosen, strings.Trim(name, "/"))
			break
		}
	}
	if _, ok := pb.Blobs[deps.GitLabDepsFile]; ok {
		chosen = append(chosen, deps.GitLabDepsFile)
	}
	files := make([]File, 0, len(chosen))
	version := sha1.New()
	read := 0
	for _, name := range chosen {
		blob := pb.Blobs[name]
		content := blob.Content
		if blob.Complete {
			if b.blobs.put(blob.ID, content) {
				read++
			}
		} else {
			data, fetched, err := b.blobs.get(ctx, b.gl, lp.ID, blob.ID)
			if fetched {
				read++
			}
			if err != nil {
				return nil, "", read, fmt.Errorf("read %s: %w", name, err)
			}
			content = data
		}
		files = append(files, File{Name: name, Content: content})
		fmt.Fprintf(version, "%s\x00%s\n", name, blob.ID)
	}
	return files, "blobs:" + hex.EncodeToString(version.Sum(nil)), read, nil
}
