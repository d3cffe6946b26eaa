package integration

import (
	"strings"
	"testing"
)

// GitLab reads "ruby:3.2" as docker.io/library/ruby:3.2. On a host whose
// registries.conf defines no unqualified-search registries (Debian's
// default, and this CI's), podman refuses a short name outright, so the
// driver must hand podman the qualified name. (The pull itself fails here:
// no network; what matters is that it was not refused as a short name.)
func TestShortImageNameIsQualified(t *testing.T) {
	r := newRunner(t, "")
	j := r.newJob(uniqueID(63))
	j.Image = "review-absent-image-zz:1"
	jr := r.runJob(j)
	if strings.Contains(jr.log, "short-name") {
		t.Errorf("podman got an unqualified image name:\n%s", jr.log)
	}
	r.assertGone(j)
}
