package scan

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// batchReader reads the dependency files of up to gitlab.MaxFilesBatch
// projects with one GraphQL request, and gives each project the files
// readFiles would have given it: the same names chosen, the same blob ids,
// so the same version digest (a project read one way and rescanned the
// other is not read again). The batch also reads the branch names and
// the literal followed branches' files of the projects a refs rule
// matches (gitlab.Client.ReadBatch), for readRefsBatched.
type batchReader struct {
	gl             GitLab
	br             BatchReader
	blobs          *blobCache
	names          []string // Containerfiles, .gitlab-deps, the CI configuration
	containerfiles []string
	listed         []gitlab.Project
	needCI         func(i int) bool // whether listed[i]'s CI configuration is read
	logger         *slog.Logger
	// rules are the refs rules of the projects whose refs this scan
	// reads, by index (planRefs); refs receives what a batch read of
	// them.
	rules map[int]deps.RefRule
	refs  *refsSource
}

// refsQuery is what a batch asks of listed[i]'s branches under rule: the
// names its branch patterns may match, and the files at its literal
// branches.
func (b batchReader) refsQuery(i int, rule deps.RefRule) gitlab.RefsQuery {
	lp := b.listed[i]
	return gitlab.RefsQuery{Path: lp.Path, Patterns: rule.Branches, Branches: literalBranches(lp, rule)}
}

// read reads the projects listed[i], i in batch, and passes each one's
// result to done; and the branches of those of refs (indexes of projects
// whose rule follows branches), which it records in b.refs. A project the
// GraphQL answer does not serve (missing, its own field error, a default
// branch other than the listed one) is read through REST by rest; its
// refs are then left for readAllRefs to read through REST. When the
// request itself fails the whole batch is read through REST, except that
// ErrGraphQLUnsupported is returned when giveUp is set (the scan then
// reads everything through REST). refRequests are the requests that read
// branches alone.
func (b batchReader) read(ctx context.Context, batch, refs []int, giveUp bool, rest func(context.Context, int) error,
	done func(i int, r filesRead) error) (refRequests int, err error) {
	paths := make([]string, len(batch))
	withCI := false
	for k, i := range batch {
		paths[k] = b.listed[i].Path
		withCI = withCI || b.needCI(i)
	}
	names := b.names
	if !withCI {
		// Nobody in the batch needs it: a CI configuration can be the
		// largest file of a project, and GraphQL sends it whole.
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == CIConfigFile })
	}
	q := gitlab.BatchQuery{Paths: paths, Names: names}
	if b.refs != nil {
		q.RefNames = b.refs.names
		for _, i := range refs {
			q.Refs = append(q.Refs, b.refsQuery(i, b.rules[i]))
		}
	}
	got, err := b.br.ReadBatch(ctx, q)
	switch {
	case err == nil:
	case giveUp && errors.Is(err, gitlab.ErrGraphQLUnsupported):
		return 0, err
	case errors.Is(err, gitlab.ErrUnauthorized) || ctx.Err() != nil:
		return 0, err
	default:
		b.logger.Warn("GraphQL read failed; reading these projects through REST", "projects", len(batch), "err", err)
		for _, i := range batch {
			if err := rest(ctx, i); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}
	for _, i := range refs {
		if pr, ok := got.Refs[strings.ToLower(b.listed[i].Path)]; ok {
			b.refs.record(i, pr)
		}
	}
	for _, i := range batch {
		lp := b.listed[i]
		pb, ok := got.Projects[strings.ToLower(lp.Path)]
		switch {
		case !ok || pb.Err != nil || (pb.RootRef != "" && pb.RootRef != lp.DefaultBranch):
			if pb.Err != nil {
				b.logger.Debug("GraphQL could not read a project; reading it through REST", "project", lp.Path, "err", pb.Err)
			}
			err = rest(ctx, i)
		case pb.RootRef == "":
			err = done(i, filesRead{err: fmt.Errorf("repository of %s is empty: %w", lp.Path, gitlab.ErrNotFound)})
		default:
			err = done(i, b.files(ctx, lp, pb, b.needCI(i)))
		}
		if err != nil {
			return got.RefRequests, err
		}
	}
	return got.RefRequests, nil
}

// files chooses and completes a project's files from a GraphQL answer as
// readFiles does from a tree listing: the first Containerfile name present
// and .gitlab-deps; a blob GraphQL did not give whole (binary, cut) is read
// by id through REST. The CI configuration is read when withCI.
func (b batchReader) files(ctx context.Context, lp gitlab.Project, pb gitlab.ProjectBlobs, withCI bool) filesRead {
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
	r := filesRead{files: make([]File, 0, len(chosen))}
	version := sha1.New()
	for _, name := range chosen {
		blob := pb.Blobs[name]
		content, err := b.content(ctx, lp, blob, &r.read)
		if err != nil {
			return filesRead{read: r.read, err: fmt.Errorf("read %s: %w", name, err)}
		}
		r.files = append(r.files, File{Name: name, Content: content})
		fmt.Fprintf(version, "%s\x00%s\n", name, blob.ID)
	}
	r.version = "blobs:" + hex.EncodeToString(version.Sum(nil))
	if withCI {
		r.ci.read = true
		if blob, ok := pb.Blobs[CIConfigFile]; ok {
			content, err := b.content(ctx, lp, blob, &r.read)
			r.ci.read, r.ci.declares = err == nil, err == nil && DeclaresActionIDInput(content)
		}
	}
	return r
}

// content is a blob's content: from the GraphQL answer when it came
// whole, else read by id through REST. read counts the blobs read.
func (b batchReader) content(ctx context.Context, lp gitlab.Project, blob gitlab.Blob, read *int) ([]byte, error) {
	if blob.Complete {
		if b.blobs.put(blob.ID, blob.Content) {
			*read++
		}
		return blob.Content, nil
	}
	data, fetched, err := b.blobs.get(ctx, b.gl, lp.ID, blob.ID)
	if fetched {
		*read++
	}
	return data, err
}
