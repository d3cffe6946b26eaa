package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/docker/go-units"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// DefaultConfigPath is read when neither --config nor
// PODMAN_EXECUTOR_CONFIG names a file; it may be absent.
const DefaultConfigPath = "/etc/podman-executor/config.toml"

// Config is the driver's own configuration (not the runner's config.toml).
// Every key is optional; Defaults fills in what a runner host needs.
type Config struct {
	// PodmanURL is the podman API service, e.g. unix:///run/podman/podman.sock.
	PodmanURL string `toml:"podman_url"`
	// DefaultImage is used when the job names no image.
	DefaultImage string `toml:"default_image"`
	// AllowedImages and AllowedServices are globs ("*" within a path
	// segment, "**" across segments); empty allows everything.
	AllowedImages   []string `toml:"allowed_images"`
	AllowedServices []string `toml:"allowed_services"`
	// PullPolicy is "always", "if-not-present" or "never".
	PullPolicy string `toml:"pull_policy"`
	// AllowedPullPolicies are the policies a job may ask for with
	// `image: pull_policy:`; empty allows only PullPolicy.
	AllowedPullPolicies []string `toml:"allowed_pull_policies"`
	// BuildsDir and CacheDir are paths inside the job container.
	BuildsDir string `toml:"builds_dir"`
	CacheDir  string `toml:"cache_dir"`
	// BuildsVolume keeps BuildsDir in a podman volume per runner, project
	// and concurrent id, so the next job fetches incrementally instead of
	// cloning; gc removes volumes unused for gc_cache_max_age.
	BuildsVolume bool `toml:"builds_volume"`
	// CacheHostDir holds one cache directory per runner and project; it is
	// mounted at CacheDir and survives the job.
	CacheHostDir string `toml:"cache_host_dir"`
	// HelperBinary is the host path of gitlab-runner (or
	// gitlab-runner-helper), mounted read-only as gitlab-runner on the
	// job's PATH. Empty: looked up on the host PATH; "none" disables it.
	HelperBinary string `toml:"helper_binary"`
	// Volumes are extra volumes as podman's -v reads them:
	// "host-dir:ctr-dir[:options]" or "volume-name:ctr-dir[:options]",
	// options ro, rw, z, Z, U, O, ... (containers/common's parser).
	Volumes []string `toml:"volumes"`
	// Network is a podman network every job container joins.
	Network string `toml:"network"`
	// NetworkMode "host" runs the job (and helper) containers in the
	// host's network namespace; services are then refused.
	NetworkMode string `toml:"network_mode"`
	// HelperImage, when set, is an image with git and the runner helper:
	// the stages that fetch sources and handle caches and artifacts run in
	// a container of it sharing the job's builds directory, so job images
	// need neither.
	HelperImage string `toml:"helper_image"`
	// Memory ("2g"), CPUs (1.5) and PidsLimit limit each container.
	Memory     string  `toml:"memory"`
	CPUs       float64 `toml:"cpus"`
	PidsLimit  int64   `toml:"pids_limit"`
	Privileged bool    `toml:"privileged"`
	// AuthFile is a registry auth file (containers-auth.json or a docker
	// config.json) used for pulls that have no job credentials.
	AuthFile string `toml:"auth_file"`
	// InsecureRegistries are registries ("host" or "host:port", as in an
	// image reference) pulled from without TLS verification, which also
	// allows plain HTTP: internal registries without a trusted certificate.
	InsecureRegistries []string `toml:"insecure_registries"`
	// WaitForServicesTimeout is how many seconds prepare waits for the
	// services to be ready (ports listening, or HEALTHCHECK healthy);
	// -1 disables the wait, 0 means the default (30).
	WaitForServicesTimeout int `toml:"wait_for_services_timeout"`
	// StateDir holds, per running job, the directory through which stages
	// reach the job container without a podman exec (see package channel).
	// Used when podman_url is a local unix socket.
	StateDir string `toml:"state_dir"`
	// StopGrace is how long a canceled stage's process gets between
	// SIGTERM and SIGKILL. Keep it below the runner's graceful kill timeout.
	StopGrace duration `toml:"stop_grace"`
	// GCMaxAge and GCCacheMaxAge are gc's defaults.
	GCMaxAge      duration `toml:"gc_max_age"`
	GCCacheMaxAge duration `toml:"gc_cache_max_age"`
}

// duration reads "10s", "3h" from TOML.
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Host is what defaults depend on: the driver's own environment (not the
// job's), its uid, and whether a socket path is usable.
type Host struct {
	Env      map[string]string
	UID      int
	Usable   func(path string) bool
	LookPath func(file string) (string, error)
}

// Defaults returns the configuration used for keys a file leaves out.
func Defaults(h Host) Config {
	c := Config{
		PodmanURL:              podmanURL(h),
		DefaultImage:           "docker.io/library/alpine:3",
		PullPolicy:             "if-not-present",
		BuildsDir:              "/builds",
		CacheDir:               "/cache",
		CacheHostDir:           "/var/cache/podman-executor",
		StateDir:               "/run/podman-executor",
		WaitForServicesTimeout: 30,
		StopGrace:              duration{10 * time.Second},
		GCMaxAge:               duration{3 * time.Hour},
		GCCacheMaxAge:          duration{14 * 24 * time.Hour},
	}
	if h.UID != 0 {
		base := h.Env["XDG_CACHE_HOME"]
		if base == "" {
			base = filepath.Join(h.Env["HOME"], ".cache")
		}
		c.CacheHostDir = filepath.Join(base, "podman-executor")
		run := h.Env["XDG_RUNTIME_DIR"]
		if run == "" {
			run = filepath.Join(os.TempDir(), "podman-executor-"+strconv.Itoa(h.UID))
		}
		c.StateDir = filepath.Join(run, "podman-executor")
	}
	if h.LookPath != nil {
		for _, name := range []string{"gitlab-runner-helper", "gitlab-runner"} {
			if p, err := h.LookPath(name); err == nil {
				c.HelperBinary = p
				break
			}
		}
	}
	return c
}

// podmanURL picks $CONTAINER_HOST, else the rootful socket when this user
// can use it, else the rootless one.
func podmanURL(h Host) string {
	if v := h.Env["CONTAINER_HOST"]; v != "" {
		return v
	}
	const rootful = "/run/podman/podman.sock"
	if h.UID == 0 || (h.Usable != nil && h.Usable(rootful)) {
		return "unix://" + rootful
	}
	dir := h.Env["XDG_RUNTIME_DIR"]
	if dir == "" {
		dir = "/run/user/" + strconv.Itoa(h.UID)
	}
	return "unix://" + filepath.Join(dir, "podman", "podman.sock")
}

// LoadConfig reads path over the defaults. A missing file at the default
// path means "all defaults"; a missing file that was asked for is an error,
// and so is an unknown key (a typo would otherwise be silently ignored).
func LoadConfig(path string, explicit bool, defaults Config) (Config, error) {
	c := defaults
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return c, c.validate()
	}
	if err != nil {
		return Config{}, fmt.Errorf("read driver config: %w", err)
	}
	return parseConfig(string(b), path, c)
}

// parseConfig decodes TOML text over c.
func parseConfig(text, path string, c Config) (Config, error) {
	md, err := toml.Decode(text, &c)
	if err != nil {
		return Config{}, fmt.Errorf("parse driver config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return Config{}, fmt.Errorf("driver config %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	if c.WaitForServicesTimeout == 0 {
		c.WaitForServicesTimeout = 30
	}
	return c, c.validate()
}

// validate checks values that would otherwise fail late, inside a job.
func (c Config) validate() error {
	switch c.PullPolicy {
	case "always", "if-not-present", "never":
	default:
		return fmt.Errorf("driver config: pull_policy %q: want always, if-not-present or never", c.PullPolicy)
	}
	if _, err := c.memoryBytes(); err != nil {
		return err
	}
	for _, p := range c.AllowedPullPolicies {
		switch p {
		case "always", "if-not-present", "never":
		default:
			return fmt.Errorf("driver config: allowed_pull_policies entry %q: want always, if-not-present or never", p)
		}
	}
	switch c.NetworkMode {
	case "", "bridge", "host":
	default:
		return fmt.Errorf("driver config: network_mode %q: want \"bridge\" or \"host\"", c.NetworkMode)
	}
	if c.NetworkMode == "host" && c.Network != "" {
		return fmt.Errorf("driver config: network %q and network_mode = \"host\" exclude each other", c.Network)
	}
	if c.WaitForServicesTimeout < -1 {
		return fmt.Errorf("driver config: wait_for_services_timeout %d: want seconds, or -1 to disable", c.WaitForServicesTimeout)
	}
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("driver config: state_dir %q must be an absolute path (or \"\" to disable the stage channel)", c.StateDir)
	}
	if c.CPUs < 0 || c.PidsLimit < 0 {
		return errors.New("driver config: cpus and pids_limit must not be negative")
	}
	for _, v := range c.Volumes {
		if err := container.ValidateVolume(v); err != nil {
			return fmt.Errorf("driver config: %w", err)
		}
	}
	for _, g := range append(append([]string{}, c.AllowedImages...), c.AllowedServices...) {
		if err := validGlob(g); err != nil {
			return fmt.Errorf("driver config: allowed glob %q: %w", g, err)
		}
	}
	for _, r := range c.InsecureRegistries {
		if h := normalizeRegistry(r); h == "" || strings.ContainsAny(h, " \t*") {
			return fmt.Errorf("driver config: insecure_registries entry %q: want host or host:port", r)
		}
	}
	if !filepath.IsAbs(c.BuildsDir) || !filepath.IsAbs(c.CacheDir) || !filepath.IsAbs(c.CacheHostDir) {
		return errors.New("driver config: builds_dir, cache_dir and cache_host_dir must be absolute paths")
	}
	return nil
}

// insecure reports whether host (as registryHost returns it) is listed in
// insecure_registries.
func (c Config) insecure(host string) bool {
	for _, r := range c.InsecureRegistries {
		if strings.EqualFold(normalizeRegistry(r), host) {
			return true
		}
	}
	return false
}

// memoryBytes parses Memory ("512m", "2g"); 0 means unlimited.
func (c Config) memoryBytes() (int64, error) {
	if c.Memory == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(c.Memory)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("driver config: memory %q: want a size such as 512m or 2g", c.Memory)
	}
	return n, nil
}
