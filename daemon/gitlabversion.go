package daemon

import (
	"context"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// gitlabFeature is a GitLab feature depsd uses where the instance has it
// (docs/gitlab-versions.md).
type gitlabFeature struct {
	name         string
	major, minor int
	without      string // what depsd does on an older GitLab
}

var gitlabFeatures = []gitlabFeature{
	{"pipeline variables settings", 17, 1, "no per-project settings: variables are refused only by restrict_user_defined_variables"},
	{"pipeline inputs", 17, 10, "projects that refuse variables get pipelines without the depsd_action_id input"},
}

// readGitLabVersion reads GET /version at start, logs it with the features
// it lacks, and tells the engine whether pipeline inputs exist. A GitLab
// that does not answer is taken for a current one (the answers to the
// creates teach the rest).
func (d *Daemon) readGitLabVersion(ctx context.Context) {
	// Bounded: a GitLab that is down must not hold the start up (the
	// client retries with backoff).
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := d.gitlab.Version(ctx)
	if err != nil {
		d.log.Warn("cannot read the GitLab version; assuming a current GitLab", "err", err)
		return
	}
	d.log.Info("GitLab version", "version", v.Version, "revision", v.Revision)
	for _, f := range gitlabFeatures {
		if !v.AtLeast(f.major, f.minor) {
			d.log.Warn("GitLab lacks a feature depsd uses", "feature", f.name, "needs", versionString(f.major, f.minor),
				"version", v.Version, "without", f.without)
		}
	}
	d.engine.SetPipelineInputs(v.AtLeast(17, 10))
	d.glVersion.Store(&v)
}

func versionString(major, minor int) string { return fmt.Sprintf("%d.%d", major, minor) }

// GitLabVersion is the GitLab version read at start; ok is false until it
// was read (or when GitLab did not answer).
func (d *Daemon) GitLabVersion() (v gitlab.Version, ok bool) {
	if p := d.glVersion.Load(); p != nil {
		return *p, true
	}
	return gitlab.Version{}, false
}
