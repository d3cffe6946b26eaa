package executor

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// BuildProfile is what a job whose image matches allowed_build_images
// gets, so that buildah (or podman build) inside it can build and push
// images without privileged: upstream's "podman in a container" recipe
// (/dev/fuse, label=disable, the capabilities a root build in a chroot
// needs, BUILDAH_ISOLATION=chroot) and its build storage on a persistent
// volume per runner and project, so the layer cache survives the job.
// Mounting the podman socket is not offered: it would give the job the
// socket owner's power over the host.
type BuildProfile struct {
	Devices     []string `toml:"devices"`
	CapAdd      []string `toml:"cap_add"`
	SecurityOpt []string `toml:"security_opt"`
	// UsernsMode is the job container's user namespace: "per-project"
	// (the default) maps container IDs 0-65535 to a host range of their
	// own per runner and project, the same for every job of the project
	// so its build storage stays its own (with rootless podman, whose user
	// namespace is already the runner user's, it is that namespace); else
	// podman's userns_mode ("" keeps the runner's userns_mode). The host's
	// namespace ("host", or "" where userns_mode is "" or "host") needs
	// UnsafeBuildsAsHostRoot.
	UsernsMode string `toml:"userns_mode"`
	// UnsafeBuildsAsHostRoot lets UsernsMode be "host", or "" with the
	// top-level userns_mode "" or "host": the build job's root, which has
	// SYS_ADMIN, is then the host's root on rootful podman. Config load
	// refuses those modes without it.
	UnsafeBuildsAsHostRoot bool `toml:"unsafe_builds_as_host_root"`
	// StoragePath is where the build storage volume is mounted: the
	// storage root of root's containers-storage in the job image.
	StoragePath string `toml:"storage_path"`
	// Env are variables set in the job container.
	Env map[string]string `toml:"env"`
}

// DefaultBuildProfile is the build profile a config leaves as it is.
func DefaultBuildProfile() BuildProfile {
	return BuildProfile{
		Devices:     []string{"/dev/fuse"},
		CapAdd:      []string{"SYS_ADMIN", "SETFCAP"},
		SecurityOpt: []string{"label=disable"},
		UsernsMode:  usernsPerProject,
		StoragePath: "/var/lib/containers",
		Env:         map[string]string{"BUILDAH_ISOLATION": "chroot", "BUILDAH_LAYERS": "true"},
	}
}

// Per-project user namespaces: project n's container IDs 0-65535 are
// host IDs usernsBase + (n mod usernsSlots)*usernsSize onwards (a
// project ID that is not a number is hashed). Above 2^30, away from the
// subuid ranges useradd hands out (100000 onwards), and below 2^31, where
// podman's userns=auto ranges start by convention. Projects whose IDs
// differ by a multiple of 16384 share a range: the range keeps a job's
// root from being the host's root and makes the project's build storage
// its own on disk; separate containers and volumes keep projects apart.
const (
	usernsPerProject = "per-project"
	usernsBase       = 1 << 30
	usernsSize       = 65536
	usernsSlots      = (1 << 30) / usernsSize
)

// idMap is the per-project ID map of project.
func idMap(project string) string {
	n, err := strconv.ParseUint(project, 10, 64)
	if err != nil {
		h := fnv.New64a()
		_, _ = h.Write([]byte(project))
		n = h.Sum64()
	}
	slot := int64(n % usernsSlots)
	return fmt.Sprintf("0:%d:%d", usernsBase+slot*usernsSize, usernsSize)
}

// options are the container options the profile adds to the job's, for
// the job of id. A rootless podman's user namespace holds only its user's
// subordinate IDs (typically 65536): no room for a range per project, so there
// "per-project" is the runner user's namespace, as every rootless job's.
func (b BuildProfile) options(id Identity, rootless bool) container.Options {
	o := container.Options{Devices: b.Devices, CapAdd: b.CapAdd, SecurityOpt: b.SecurityOpt, UserNS: b.UsernsMode, Env: b.Env}
	if b.UsernsMode == usernsPerProject {
		o.UserNS = ""
		if !rootless {
			o.IDMap = idMap(id.Project)
		}
	}
	return o
}

// validate checks the profile as podman would read it, and that a build
// job (when allowed_build_images lets any run; jobUserNS is the top-level
// userns_mode) does not get the host's user namespace unless the operator
// said it may.
func (b BuildProfile) validate(builds bool, jobUserNS string) error {
	if err := b.options(Identity{}, false).Check(); err != nil {
		return fmt.Errorf("driver config: [build] %w", err)
	}
	mode := b.UsernsMode
	if mode == "" {
		mode = jobUserNS
	}
	if builds && (mode == "" || mode == "host") && !b.UnsafeBuildsAsHostRoot {
		what := fmt.Sprintf("[build] userns_mode %q", b.UsernsMode)
		if b.UsernsMode == "" {
			what += fmt.Sprintf(" (keeping userns_mode %q)", jobUserNS)
		}
		return fmt.Errorf("driver config: %s runs build jobs, which have %v, in the host's user namespace: with rootful podman their root is the host's root. "+
			"Use \"per-project\" (the default; with rootless podman it is the runner user's namespace) or another namespace, "+
			"or set [build] unsafe_builds_as_host_root = true", what, b.CapAdd)
	}
	if !filepath.IsAbs(b.StoragePath) {
		return fmt.Errorf("driver config: [build] storage_path %q must be an absolute path", b.StoragePath)
	}
	return nil
}

// buildImage reports whether image (as the job names it) gets the build
// profile: only images matching allowed_build_images do; none when the
// list is empty.
func (c Config) buildImage(image string) bool {
	return len(c.AllowedBuildImages) > 0 && allowed(image, c.AllowedBuildImages)
}

// privileged reports whether a container of image runs privileged:
// privileged = true, and image on list when the list is set (the docker
// executor's allowed_privileged_images / _services rule).
func (c Config) privileged(image string, list []string) bool {
	return c.Privileged && allowed(image, list)
}

// buildProfile is what a build job's containers get: the job container
// options (the storage volume, at storage_path), the helper container
// only the user namespace.
type buildProfile struct {
	options container.Options
	storage string // volume spec
}

// ownUserNS reports whether the build job runs in a user namespace other
// than the other jobs': its root is not theirs.
func (p buildProfile) ownUserNS() bool {
	return p.options.IDMap != "" || (p.options.UserNS != "" && p.options.UserNS != "host")
}

// userNS is the user namespace part of the options, for the helper
// container: the job's ID map, so the same namespace as the job's (with
// userns_mode "auto" podman hands each container a range of its own, so
// the helper's would not be the job's).
func (p buildProfile) userNS() container.Options {
	return container.Options{UserNS: p.options.UserNS, IDMap: p.options.IDMap}
}

// buildProfile creates (once) the project's build storage volume and
// returns the build profile of job id.
func (e *Executor) buildProfile(ctx context.Context, id Identity) (buildProfile, error) {
	name := id.BuildStorageVolumeName()
	if err := e.keptVolume(ctx, id, name, roleBuildStorage); err != nil {
		return buildProfile{}, err
	}
	rootless := false
	if e.Config.Build.UsernsMode == usernsPerProject {
		var err error
		if rootless, err = e.Engine.Rootless(ctx); err != nil {
			return buildProfile{}, err
		}
	}
	o := e.Config.Build.options(id, rootless)
	userns := o.UserNS
	if o.IDMap != "" {
		userns = "IDs " + o.IDMap
	}
	e.progress("Build profile: %s at %s (persistent build storage), devices %v, capabilities %v, security options %v, user namespace %s",
		name, e.Config.Build.StoragePath, e.Config.Build.Devices, e.Config.Build.CapAdd, e.Config.Build.SecurityOpt, cmp.Or(userns, "the runner user's"))
	return buildProfile{options: o, storage: name + ":" + e.Config.Build.StoragePath}, nil
}
