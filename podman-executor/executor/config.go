package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
	// RunnerName names this runner in the names and labels of what the
	// driver creates (containers, caches, volumes): jobs of runners with
	// the same name share project caches and volumes. Set by the operator,
	// never taken from a job's variables.
	RunnerName string `toml:"runner_name"`
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
	// SplitProtectedRefs gives the jobs of a project's protected refs a
	// cache directory, builds volume and build storage of their own, apart
	// from those of its other refs (see Job.Protected).
	SplitProtectedRefs bool `toml:"split_protected_refs"`
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
	Memory    string  `toml:"memory"`
	CPUs      float64 `toml:"cpus"`
	PidsLimit int64   `toml:"pids_limit"`
	// Privileged runs job and service containers privileged -- only the
	// images matching AllowedPrivilegedImages and the services matching
	// AllowedPrivilegedServices when those are set (the docker executor's
	// rule).
	Privileged                bool     `toml:"privileged"`
	AllowedPrivilegedImages   []string `toml:"allowed_privileged_images"`
	AllowedPrivilegedServices []string `toml:"allowed_privileged_services"`

	// The docker executor's container options ([runners.docker]), under
	// its names, read by podman's parsers (container.Options). The job
	// container gets them all; services get dns, dns_search, extra_hosts,
	// userns_mode, shm_size and services_tmpfs, as with the docker executor.
	Devices        []string          `toml:"devices"`
	CapAdd         []string          `toml:"cap_add"`
	CapDrop        []string          `toml:"cap_drop"`
	SecurityOpt    []string          `toml:"security_opt"`
	UsernsMode     string            `toml:"userns_mode"`
	Tmpfs          map[string]string `toml:"tmpfs"`
	ServicesTmpfs  map[string]string `toml:"services_tmpfs"`
	ShmSize        byteSize          `toml:"shm_size"`
	DNS            []string          `toml:"dns"`
	DNSSearch      []string          `toml:"dns_search"`
	ExtraHosts     []string          `toml:"extra_hosts"`
	Sysctls        map[string]string `toml:"sysctls"`
	Ulimit         map[string]string `toml:"ulimit"`
	OOMKillDisable bool              `toml:"oom_kill_disable"`
	// ServicesLimit is the most services a job may have; -1 (the default)
	// means no limit.
	ServicesLimit int `toml:"services_limit"`
	// ServiceMemory and ServiceCPUs limit each service container; unset,
	// services get memory and cpus.
	ServiceMemory string   `toml:"service_memory"`
	ServiceCPUs   cpuCount `toml:"service_cpus"`

	// AllowedBuildImages are globs of job images that get Build, the
	// profile for building images inside the job without privileged.
	AllowedBuildImages []string     `toml:"allowed_build_images"`
	Build              BuildProfile `toml:"build"`
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

// validRunnerName is what runner_name may be: it goes into container,
// volume and directory names as it is.
var validRunnerName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// byteSize reads a size as the docker executor's shm_size (an integer,
// bytes) or as podman's --shm-size ("64m").
type byteSize int64

func (b *byteSize) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		*b = byteSize(v)
		return nil
	case string:
		n, err := units.RAMInBytes(v)
		if err != nil {
			return fmt.Errorf("size %q: want bytes or a size such as 64m: %w", v, err)
		}
		*b = byteSize(n)
		return nil
	}
	return fmt.Errorf("size %v: want bytes or a string such as \"64m\"", v)
}

// cpuCount reads a number of CPUs as the docker executor writes it (a
// string, "1.5") or as a number.
type cpuCount float64

func (c *cpuCount) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		*c = cpuCount(v)
		return nil
	case float64:
		*c = cpuCount(v)
		return nil
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("cpus %q: want a number such as 1.5", v)
		}
		*c = cpuCount(f)
		return nil
	}
	return fmt.Errorf("cpus %v: want a number such as 1.5", v)
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
		RunnerName:             "default",
		SplitProtectedRefs:     true,
		DefaultImage:           "docker.io/library/alpine:3",
		PullPolicy:             "if-not-present",
		BuildsDir:              "/builds",
		CacheDir:               "/cache",
		CacheHostDir:           "/var/cache/podman-executor",
		StateDir:               "/run/podman-executor",
		WaitForServicesTimeout: 30,
		ServicesLimit:          -1,
		Build:                  DefaultBuildProfile(),
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
	if !validRunnerName.MatchString(c.RunnerName) {
		return fmt.Errorf("driver config: runner_name %q: want letters, digits, '.', '_' or '-'", c.RunnerName)
	}
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
	if c.CPUs < 0 || c.PidsLimit < 0 || c.ServiceCPUs < 0 {
		return errors.New("driver config: cpus, service_cpus and pids_limit must not be negative")
	}
	if _, err := c.serviceMemoryBytes(); err != nil {
		return err
	}
	if c.ServicesLimit < -1 {
		return fmt.Errorf("driver config: services_limit %d: want a number of services, or -1 for no limit", c.ServicesLimit)
	}
	if err := c.jobOptions().Check(); err != nil {
		return fmt.Errorf("driver config: %w", err)
	}
	if err := container.CheckTmpfs("services_tmpfs", c.ServicesTmpfs); err != nil {
		return fmt.Errorf("driver config: %w", err)
	}
	if err := c.Build.validate(len(c.AllowedBuildImages) > 0, c.UsernsMode); err != nil {
		return err
	}
	for _, v := range c.Volumes {
		if err := container.ValidateVolume(v); err != nil {
			return fmt.Errorf("driver config: %w", err)
		}
	}
	globs := append(append([]string{}, c.AllowedImages...), c.AllowedServices...)
	globs = append(append(append(globs, c.AllowedPrivilegedImages...), c.AllowedPrivilegedServices...), c.AllowedBuildImages...)
	for _, g := range globs {
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

// serviceMemoryBytes parses ServiceMemory; 0 means "as memory".
func (c Config) serviceMemoryBytes() (int64, error) {
	if c.ServiceMemory == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(c.ServiceMemory)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("driver config: service_memory %q: want a size such as 512m or 2g", c.ServiceMemory)
	}
	return n, nil
}

// jobOptions are the docker executor's options for the job container.
func (c Config) jobOptions() container.Options {
	return container.Options{
		Devices: c.Devices, CapAdd: c.CapAdd, CapDrop: c.CapDrop, SecurityOpt: c.SecurityOpt,
		UserNS: c.UsernsMode, Tmpfs: c.Tmpfs, ShmSize: int64(c.ShmSize),
		DNS: c.DNS, DNSSearch: c.DNSSearch, ExtraHosts: c.ExtraHosts,
		Sysctls: c.Sysctls, Ulimits: c.Ulimit, OOMKillDisable: c.OOMKillDisable,
	}
}

// serviceOptions are those the docker executor gives service containers.
func (c Config) serviceOptions() container.Options {
	return container.Options{
		UserNS: c.UsernsMode, Tmpfs: c.ServicesTmpfs, ShmSize: int64(c.ShmSize),
		DNS: c.DNS, DNSSearch: c.DNSSearch, ExtraHosts: c.ExtraHosts,
	}
}
