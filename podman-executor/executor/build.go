package executor

import (
	"context"
	"fmt"
	"path/filepath"

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
	// UsernsMode is the job container's user namespace ("" keeps
	// userns_mode, or podman's default).
	UsernsMode string `toml:"userns_mode"`
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
		CapAdd:      []string{"SYS_ADMIN", "MKNOD", "SETFCAP"},
		SecurityOpt: []string{"label=disable"},
		StoragePath: "/var/lib/containers",
		Env:         map[string]string{"BUILDAH_ISOLATION": "chroot"},
	}
}

// options are the container options the profile adds to the job's.
func (b BuildProfile) options() container.Options {
	return container.Options{Devices: b.Devices, CapAdd: b.CapAdd, SecurityOpt: b.SecurityOpt, UserNS: b.UsernsMode, Env: b.Env}
}

// validate checks the profile as podman would read it.
func (b BuildProfile) validate() error {
	if err := b.options().Check(); err != nil {
		return fmt.Errorf("driver config: [build] %w", err)
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

// withBuildProfile gives the job container spec s the build profile and
// mounts the project's build storage volume at storage_path.
func (e *Executor) withBuildProfile(ctx context.Context, id Identity, s *container.Spec) error {
	name := id.BuildStorageVolumeName()
	if err := e.keptVolume(ctx, id, name, roleBuildStorage); err != nil {
		return err
	}
	s.Options = s.Options.Merge(e.Config.Build.options())
	s.Volumes = append(s.Volumes, name+":"+e.Config.Build.StoragePath)
	e.progress("Build profile: %s at %s (persistent build storage), devices %v, capabilities %v, security options %v",
		name, e.Config.Build.StoragePath, e.Config.Build.Devices, e.Config.Build.CapAdd, e.Config.Build.SecurityOpt)
	return nil
}
