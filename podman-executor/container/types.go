// Package container drives podman for the executor: images, containers,
// exec sessions with stdin, networks and label queries, through podman's
// REST API (github.com/containers/podman/v4/pkg/bindings). A Fake with the
// same methods sits beside the real Podman so the executor's stage logic can
// be tested without a podman service.
package container

import (
	"errors"
	"io"
	"time"
)

// ErrNotFound reports that a container, network or image does not exist.
// Callers that clean up treat it as success.
var ErrNotFound = errors.New("not found")

// ErrBusy reports a removal podman could not finish because a mount of the
// container was still busy ("unlinkat .../userdata/shm: device or resource
// busy", seen when a container that ran beside others is removed): a
// transient failure, worth retrying.
var ErrBusy = errors.New("busy")

// Mount is a host directory or file bind-mounted into a container.
type Mount struct {
	Source      string
	Destination string
	ReadOnly    bool
	// Chown is podman's U option: at the container's start, Source is
	// chowned (recursively) to the container's user as the host sees it
	// (its user namespace's ID for it).
	Chown bool
}

// Spec describes a container to create. Zero values mean "podman's default".
type Spec struct {
	Name       string
	Image      string
	Entrypoint []string // nil keeps the image's entrypoint
	Command    []string // nil keeps the image's command
	Env        map[string]string
	Labels     map[string]string
	Mounts     []Mount
	// Volumes are podman -v specs ("host:ctr[:opts]", "name:ctr", "ctr"),
	// read by podman's own parser (see ValidateVolume).
	Volumes []string
	// Networks the container joins, each with its DNS aliases. Empty means
	// podman's default network.
	Networks map[string][]string
	HostAdd  []string // extra /etc/hosts lines, "name:ip"
	// HostNetwork runs the container in the host's network namespace.
	HostNetwork bool
	Hostname    string
	WorkDir     string
	User        string // user[:group] the main process runs as; "" = the image's
	// Platform ("os/arch[/variant]") selects the image variant; "" = the host's.
	Platform   string
	Memory     int64   // bytes; 0 = unlimited
	CPUs       float64 // 0 = unlimited
	PidsLimit  int64   // 0 = podman default
	Privileged bool
	// Options are the docker executor's options (devices, capabilities,
	// security options, tmpfs, DNS, ...), read by podman's parsers.
	Options Options
}

// Info is what the executor needs to know about an existing container.
type Info struct {
	ID      string
	Name    string
	Image   string
	Labels  map[string]string
	Created time.Time
	Running bool
	// ExecRunning is true while an exec session (a job stage) runs in it.
	ExecRunning bool
	// IPs maps network name to the container's address on it.
	IPs map[string]string
	// PID is the host PID of the container's main process (0: stopped).
	PID int
}

// ImageConfig is what the executor reads from a local image's config.
type ImageConfig struct {
	// ExposedTCP are the image's EXPOSEd TCP ports.
	ExposedTCP []int
	// Healthcheck is the image's HEALTHCHECK test (["CMD", ...],
	// ["CMD-SHELL", "..."], ["NONE"]); nil when it has none.
	Healthcheck []string
}

// Volume is a podman named volume as the executor sees it.
type Volume struct {
	Name    string
	Labels  map[string]string
	Created time.Time
}

// Network is a podman network as the executor sees it.
type Network struct {
	Name    string
	Labels  map[string]string
	Created time.Time
}

// Exec is one process started in a running container.
type Exec struct {
	Cmd     []string
	Env     []string // KEY=value, added to the container's environment
	WorkDir string
	Stdin   io.Reader // nil: no stdin
	Stdout  io.Writer
	Stderr  io.Writer
}

// Auth holds registry credentials for a pull. The zero value pulls
// anonymously (or with the podman service's own credentials).
type Auth struct {
	AuthFile string // host path of a containers-auth.json / docker config.json
	Username string
	Password string
	// IdentityToken is an OAuth2 refresh token for Registry (docker
	// config.json's identitytoken), used instead of a password.
	IdentityToken string
	Registry      string
}

// PullOptions say how to pull an image.
type PullOptions struct {
	Policy PullPolicy
	Auth   Auth
	// SkipTLSVerify pulls without verifying the registry's certificate and
	// allows plain HTTP: for registries the operator marked insecure.
	SkipTLSVerify bool
	// Platform ("os/arch[/variant]") pulls that variant; "" = the host's.
	Platform string
}

// PullPolicy is podman's pull policy name: "always", "missing", "never",
// "newer".
type PullPolicy string
