package scheduler

import (
	"context"
	"slices"
	"sort"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
)

// Rebuilder starts a chain rebuild of a project and everything downstream;
// *chain.Engine implements it. Rebuild only records the request (it does
// not wait for pipelines) and returns the id of the chain holding it. It
// may be called from several goroutines at once.
type Rebuilder interface {
	Rebuild(ctx context.Context, project string, reason chain.Reason) (int64, error)
}

// ImageUser is an external image and the projects that use it.
type ImageUser struct {
	Image    string   // normalised repository:tag (docker.io/library/debian:12)
	Projects []string // sorted
}

// ImageUsers returns the external images the projects in scope use by tag,
// and who uses them. The daemon builds it from the store (see
// ExternalImages). It is called about once per watch interval.
type ImageUsers func(ctx context.Context) ([]ImageUser, error)

// ExternalImages maps each external image used by tag in the given
// dependencies (project path → its dependencies) to the projects using it.
// Images pinned by digest are left out: they cannot change. Dependencies
// on projects of the instance are left out too: their rebuilds follow
// pipelines, not digests.
func ExternalImages(projects map[string][]deps.Dependency) []ImageUser {
	users := map[string][]string{}
	for project, ds := range projects {
		for _, d := range ds {
			if d.Project != "" || d.Image == "" || d.Digest != "" || d.Tag == "" {
				continue
			}
			key := d.Repository + ":" + d.Tag
			if !slices.Contains(users[key], project) {
				users[key] = append(users[key], project)
			}
		}
	}
	out := make([]ImageUser, 0, len(users))
	for image, ps := range users {
		sort.Strings(ps)
		out = append(out, ImageUser{Image: image, Projects: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out
}
