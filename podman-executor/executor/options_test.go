package executor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// TestConfigReadsDockerOptions: the docker executor's [runners.docker]
// keys, written as its users write them, load into the driver config.
func TestConfigReadsDockerOptions(t *testing.T) {
	text := `
devices = ["/dev/fuse"]
cap_add = ["NET_ADMIN"]
cap_drop = ["NET_RAW"]
security_opt = ["no-new-privileges"]
userns_mode = "auto"
tmpfs = {"/scratch" = "rw,size=64m"}
services_tmpfs = {"/var/lib/mysql" = "rw,noexec"}
shm_size = 268435456
dns = ["10.0.0.53"]
dns_search = ["ci.internal"]
extra_hosts = ["registry.ci:10.1.2.3"]
sysctls = {"net.ipv4.ip_forward" = "1"}
ulimit = {"nofile" = "1024:2048"}
oom_kill_disable = true
services_limit = 2
service_memory = "128m"
service_cpus = "0.5"
allowed_privileged_images = ["localhost/dind:*"]
allowed_privileged_services = ["docker:*-dind"]
allowed_build_images = ["localhost/buildah-job:*"]
[build]
cap_add = ["SYS_ADMIN", "MKNOD"]
`
	c, err := parseConfig(text, "t.toml", Defaults(Host{UID: 0}))
	if err != nil {
		t.Fatal(err)
	}
	o := c.jobOptions()
	if !slices.Equal(o.Devices, []string{"/dev/fuse"}) || o.UserNS != "auto" || o.ShmSize != 256<<20 || o.Tmpfs["/scratch"] != "rw,size=64m" ||
		o.Ulimits["nofile"] != "1024:2048" || !o.OOMKillDisable || o.Sysctls["net.ipv4.ip_forward"] != "1" {
		t.Errorf("job options %+v", o)
	}
	if s := c.serviceOptions(); s.Tmpfs["/var/lib/mysql"] != "rw,noexec" || len(s.Devices) != 0 || !slices.Equal(s.DNS, []string{"10.0.0.53"}) {
		t.Errorf("service options %+v", s)
	}
	if m, _ := c.serviceMemoryBytes(); m != 128<<20 || c.ServiceCPUs != 0.5 || c.ServicesLimit != 2 {
		t.Errorf("service_memory %d service_cpus %v services_limit %d", m, c.ServiceCPUs, c.ServicesLimit)
	}
	if !slices.Equal(c.Build.CapAdd, []string{"SYS_ADMIN", "MKNOD"}) || !slices.Equal(c.Build.Devices, []string{"/dev/fuse"}) ||
		c.Build.Env["BUILDAH_ISOLATION"] != "chroot" {
		t.Errorf("build profile %+v: set keys replace the default, the rest stays", c.Build)
	}
	for _, alt := range []string{`shm_size = "64m"`, `service_cpus = 1.5`, `service_cpus = 2`} {
		if _, err := parseConfig(alt, "t.toml", Defaults(Host{UID: 0})); err != nil {
			t.Errorf("%s: %v", alt, err)
		}
	}
	if c := Defaults(Host{UID: 0}); c.ServicesLimit != -1 || len(c.AllowedBuildImages) != 0 {
		t.Errorf("defaults: services_limit %d, allowed_build_images %v", c.ServicesLimit, c.AllowedBuildImages)
	}
}

// TestConfigRefusesBadOptions: a bad option stops the driver at config
// load, with the key and the value in the message.
func TestConfigRefusesBadOptions(t *testing.T) {
	tests := []struct{ text, want string }{
		{`devices = ["/dev/fuse:/dev/fuse:x"]`, `devices "/dev/fuse:/dev/fuse:x"`},
		{`cap_add = ["SYS_ADMN"]`, `cap_add "SYS_ADMN"`},
		{`security_opt = ["label:dis able"]`, `security_opt "label:dis able"`},
		{`userns_mode = "mine"`, `userns_mode "mine"`},
		{`tmpfs = {"/x" = "size=big"}`, `tmpfs "/x=size=big"`},
		{`services_tmpfs = {"rel" = "rw"}`, `services_tmpfs "rel=rw"`},
		{`shm_size = "lots"`, `shm_size`},
		{`shm_size = -5`, `shm_size "-5"`},
		{`dns = ["resolver"]`, `dns "resolver"`},
		{`extra_hosts = ["a=1.2.3.4"]`, `extra_hosts "a=1.2.3.4"`},
		{`sysctls = {"vm.swappiness" = "1"}`, `sysctls "vm.swappiness=1"`},
		{`ulimit = {"nofile" = "x"}`, `ulimit "nofile=x"`},
		{`services_limit = -2`, `services_limit -2`},
		{`service_memory = "a lot"`, `service_memory "a lot"`},
		{`service_cpus = "two"`, `cpus "two"`},
		{`service_cpus = -1.0`, `service_cpus`},
		{`allowed_build_images = ["[oops"]`, `"[oops"`},
		{"[build]\ndevices = [\"fuse\"]", `[build] devices "fuse"`},
		{"[build]\nstorage_path = \"var/lib/containers\"", `[build] storage_path`},
		{"[build]\nsocket = true", `unknown keys build.socket`},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			_, err := parseConfig(tt.text, "t.toml", Defaults(Host{UID: 0}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %s", err, tt.want)
			}
		})
	}
}

// TestPrepareAppliesOptions: what the job and service containers are
// created with, on the fake engine.
func TestPrepareAppliesOptions(t *testing.T) {
	svc := map[string]string{"CI_JOB_SERVICES": `[{"name":"` + testImage + `","alias":"db"}]`}
	tests := []struct {
		name     string
		vars     map[string]string
		cfg      func(*Config)
		wantCode int
		wantOut  string
		check    func(t *testing.T, f *fixture)
	}{
		{name: "job gets every option, services the docker executor's subset", vars: svc, cfg: func(c *Config) {
			c.Devices, c.CapAdd, c.CapDrop = []string{"/dev/fuse"}, []string{"NET_ADMIN"}, []string{"NET_RAW"}
			c.Tmpfs, c.ServicesTmpfs = map[string]string{"/scratch": "rw"}, map[string]string{"/var/lib/db": "rw"}
			c.DNS, c.ExtraHosts, c.ShmSize, c.UsernsMode = []string{"10.0.0.53"}, []string{"r:10.1.2.3"}, 1<<26, "auto"
			c.Memory, c.CPUs, c.ServiceMemory, c.ServiceCPUs = "1g", 2, "128m", 0.5
		}, check: func(t *testing.T, f *fixture) {
			job, _ := f.fake.Spec(jobName)
			o := job.Options
			if !slices.Equal(o.Devices, []string{"/dev/fuse"}) || !slices.Equal(o.CapDrop, []string{"NET_RAW"}) || o.Tmpfs["/scratch"] != "rw" ||
				o.ShmSize != 1<<26 || o.UserNS != "auto" || job.Memory != 1<<30 || job.CPUs != 2 {
				t.Errorf("job spec %+v", job)
			}
			s, _ := f.fake.Spec(jobName + "-svc0")
			so := s.Options
			if len(so.Devices) != 0 || len(so.CapAdd) != 0 || so.Tmpfs["/var/lib/db"] != "rw" || so.Tmpfs["/scratch"] != "" ||
				!slices.Equal(so.DNS, []string{"10.0.0.53"}) || !slices.Equal(so.ExtraHosts, []string{"r:10.1.2.3"}) || so.UserNS != "auto" ||
				s.Memory != 128<<20 || s.CPUs != 0.5 {
				t.Errorf("service spec %+v", s)
			}
		}},
		{name: "services_limit refuses a job with more services", vars: map[string]string{"CI_JOB_SERVICES": `[{"name":"a"},{"name":"b"}]`},
			cfg: func(c *Config) { c.ServicesLimit = 1 }, wantCode: 1, wantOut: "the job has 2 services and this runner allows 1 (services_limit)"},
		{name: "services_limit 0 allows none", vars: svc, cfg: func(c *Config) { c.ServicesLimit = 0 }, wantCode: 1, wantOut: "allows 0"},
		{name: "privileged without lists: job and services", vars: svc, cfg: func(c *Config) { c.Privileged = true }, check: func(t *testing.T, f *fixture) {
			job, _ := f.fake.Spec(jobName)
			s, _ := f.fake.Spec(jobName + "-svc0")
			if !job.Privileged || !s.Privileged {
				t.Errorf("job %v service %v", job.Privileged, s.Privileged)
			}
		}},
		{name: "privileged only for listed images and services", vars: svc, cfg: func(c *Config) {
			c.Privileged = true
			c.AllowedPrivilegedImages = []string{"localhost/dind:*"}
			c.AllowedPrivilegedServices = []string{"localhost/busybox-test:*"}
		}, check: func(t *testing.T, f *fixture) {
			job, _ := f.fake.Spec(jobName)
			s, _ := f.fake.Spec(jobName + "-svc0")
			if job.Privileged || !s.Privileged {
				t.Errorf("job %v (not listed), service %v (listed)", job.Privileged, s.Privileged)
			}
		}},
		{name: "lists without privileged give nothing", vars: svc, cfg: func(c *Config) {
			c.AllowedPrivilegedImages = []string{"**"}
			c.AllowedPrivilegedServices = []string{"**"}
		}, check: func(t *testing.T, f *fixture) {
			job, _ := f.fake.Spec(jobName)
			s, _ := f.fake.Spec(jobName + "-svc0")
			if job.Privileged || s.Privileged {
				t.Errorf("job %v service %v", job.Privileged, s.Privileged)
			}
		}},
		{name: "a build image gets the build profile and its storage volume, not privileged", vars: svc,
			cfg: func(c *Config) {
				c.AllowedBuildImages = []string{"localhost/busybox-test:*"}
				c.HelperImage = testImage
			},
			wantOut: "podman-executor-buildstore-rtok-p7 at /var/lib/containers",
			check: func(t *testing.T, f *fixture) {
				job, _ := f.fake.Spec(jobName)
				o := job.Options
				if job.Privileged || !slices.Contains(o.Devices, "/dev/fuse") || !slices.Contains(o.SecurityOpt, "label=disable") ||
					!slices.Contains(o.CapAdd, "SYS_ADMIN") || o.Env["BUILDAH_ISOLATION"] != "chroot" {
					t.Errorf("job spec %+v", job)
				}
				if o.IDMap != idMap("7") || o.UserNS != "" {
					t.Errorf("user namespace %q / ID map %q, want the project's %s", o.UserNS, o.IDMap, idMap("7"))
				}
				if !slices.Contains(job.Volumes, "podman-executor-buildstore-rtok-p7:/var/lib/containers") {
					t.Errorf("job volumes %v", job.Volumes)
				}
				vols, _ := f.fake.ListVolumes(context.Background(), map[string]string{LabelRole: roleBuildStorage, LabelProject: "7"})
				if len(vols) != 1 || vols[0].Labels[LabelJob] != "" || vols[0].Labels[LabelConcurrent] != "" {
					t.Errorf("build storage volumes %+v", vols)
				}
				h, _ := f.fake.Spec(jobName + "-helper")
				if len(h.Options.Devices) != 0 || len(h.Options.CapAdd) != 0 || slices.ContainsFunc(h.Volumes, func(v string) bool { return strings.Contains(v, "buildstore") }) {
					t.Errorf("the helper container got the build profile: %+v", h)
				}
				s, _ := f.fake.Spec(jobName + "-svc0")
				if len(s.Options.Devices) != 0 || len(s.Options.CapAdd) != 0 {
					t.Errorf("a service got the build profile: %+v", s)
				}
			}},
		{name: "other images get no build profile", cfg: func(c *Config) { c.AllowedBuildImages = []string{"localhost/buildah-job:*"} },
			check: func(t *testing.T, f *fixture) {
				job, _ := f.fake.Spec(jobName)
				if len(job.Options.Devices) != 0 || len(job.Options.CapAdd) != 0 || len(job.Volumes) != 0 {
					t.Errorf("job spec %+v", job)
				}
				if vols, _ := f.fake.ListVolumes(context.Background(), map[string]string{LabelRole: roleBuildStorage}); len(vols) != 0 {
					t.Errorf("build storage created: %v", vols)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.vars, tt.cfg)
			if f.e.Config.HelperImage != "" {
				f.e.Config.HelperBinary = "none"
			}
			err := f.e.PrepareStage(context.Background())
			if code := ExitCode(err, f.codes, f.out); code != tt.wantCode {
				t.Fatalf("exit %d, want %d (err %v)\n%s", code, tt.wantCode, err, f.out)
			}
			if !strings.Contains(f.out.String(), tt.wantOut) {
				t.Errorf("job log lacks %q:\n%s", tt.wantOut, f.out)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// TestGCBuildStorage: gc removes a project's build storage once unused
// for gc_cache_max_age, keeps it while used, and cleanup never removes it.
func TestGCBuildStorage(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	f := newFixture(t, nil, func(c *Config) { c.AllowedBuildImages = []string{"localhost/**"} })
	f.e.Now = func() time.Time { return now }
	f.fake.Now = f.e.Now
	ctx := context.Background()
	if err := f.e.PrepareStage(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.e.CleanupStage(ctx); err != nil {
		t.Fatal(err)
	}
	vol := "podman-executor-buildstore-rtok-p7"
	list := func() []container.Volume {
		v, _ := f.fake.ListVolumes(ctx, map[string]string{LabelRole: roleBuildStorage})
		return v
	}
	if len(list()) != 1 {
		t.Fatalf("cleanup removed the build storage: %v", list())
	}
	marker := f.e.volumeMarker(roleBuildStorage, vol)
	var out strings.Builder
	now = start.Add(time.Hour)
	if err := f.e.GCStage(ctx, GCOptions{MaxAge: time.Hour, CacheMaxAge: 2 * time.Hour}, &out); err != nil {
		t.Fatal(err)
	}
	if len(list()) != 1 {
		t.Fatalf("gc removed build storage used an hour ago:\n%s", &out)
	}
	now = start.Add(3 * time.Hour)
	out.Reset()
	if err := f.e.GCStage(ctx, GCOptions{MaxAge: time.Hour, CacheMaxAge: 2 * time.Hour}, &out); err != nil {
		t.Fatal(err)
	}
	if len(list()) != 0 || !strings.Contains(out.String(), "removed build storage volume "+vol) {
		t.Errorf("gc kept unused build storage %v:\n%s", list(), &out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("marker left: %v", err)
	}
}

// TestPerProjectIDMaps: a project's build jobs always get the same host
// ID range (its build storage stays writable job after job), other
// projects other ranges, all above 2^30 and below 2^31.
func TestPerProjectIDMaps(t *testing.T) {
	seen := map[string]string{}
	for _, p := range []string{"0", "1", "2", "16383", "70000", "999999999", "group/project"} {
		m := idMap(p)
		if m != idMap(p) {
			t.Fatalf("project %s: not stable", p)
		}
		var c, host, size int64
		if _, err := fmt.Sscanf(m, "%d:%d:%d", &c, &host, &size); err != nil || c != 0 || size != 65536 ||
			host < 1<<30 || host+size > 1<<31 || (host-(1<<30))%65536 != 0 {
			t.Fatalf("project %s: ID map %q", p, m)
		}
		if other, ok := seen[m]; ok {
			t.Errorf("projects %s and %s share %s", other, p, m)
		}
		seen[m] = p
	}
	if idMap("1") != idMap("16385") {
		t.Errorf("project IDs 16384 apart: %s and %s (the documented sharing)", idMap("1"), idMap("16385"))
	}
}

// TestBuildProfileOnRootlessPodman: a rootless podman has no room for a
// range per project, so a build job keeps the runner user's namespace
// there; a userns_mode the operator names is used as it is.
func TestBuildProfileOnRootlessPodman(t *testing.T) {
	tests := []struct {
		name       string
		rootless   bool
		userns     string
		wantIDMap  string
		wantUserNS string
		wantOut    string
	}{
		{"rootful, per-project", false, "per-project", idMap("7"), "", "user namespace IDs " + idMap("7")},
		{"rootless, per-project", true, "per-project", "", "", "user namespace the runner user's"},
		{"rootful, auto", false, "auto", "", "auto", "user namespace auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, func(c *Config) {
				c.AllowedBuildImages = []string{"localhost/**"}
				c.Build.UsernsMode = tt.userns
			})
			f.fake.IsRootless = tt.rootless
			if err := f.e.PrepareStage(context.Background()); err != nil {
				t.Fatal(err)
			}
			job, _ := f.fake.Spec(jobName)
			if job.Options.IDMap != tt.wantIDMap || job.Options.UserNS != tt.wantUserNS {
				t.Errorf("ID map %q userns %q, want %q %q", job.Options.IDMap, job.Options.UserNS, tt.wantIDMap, tt.wantUserNS)
			}
			if !strings.Contains(f.out.String(), tt.wantOut) {
				t.Errorf("job log lacks %q:\n%s", tt.wantOut, f.out)
			}
		})
	}
}

// TestConfigRefusesBuildsAsHostRoot: a build job has SYS_ADMIN; in the
// host's user namespace (userns_mode "host", or none: "" keeps the
// top-level userns_mode, podman's default being the host's) its root is
// the host's root with rootful podman. Config load refuses that unless
// [build] unsafe_builds_as_host_root says so.
func TestConfigRefusesBuildsAsHostRoot(t *testing.T) {
	const builds = "allowed_build_images = [\"registry.example.com/ci/*\"]\n"
	tests := []struct {
		name, text string
		refused    bool
	}{
		{"default per-project", builds, false},
		{"host", builds + "[build]\nuserns_mode = \"host\"\n", true},
		{"none, top-level none", builds + "[build]\nuserns_mode = \"\"\n", true},
		{"none, top-level host", builds + "userns_mode = \"host\"\n[build]\nuserns_mode = \"\"\n", true},
		{"none, top-level auto", builds + "userns_mode = \"auto\"\n[build]\nuserns_mode = \"\"\n", false},
		{"auto", builds + "[build]\nuserns_mode = \"auto\"\n", false},
		{"host without build images", "[build]\nuserns_mode = \"host\"\n", false},
		{"host, said unsafe", builds + "[build]\nuserns_mode = \"host\"\nunsafe_builds_as_host_root = true\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.text, "t.toml", Defaults(Host{UID: 0}))
			switch {
			case tt.refused && (err == nil || !strings.Contains(err.Error(), "[build] userns_mode") || !strings.Contains(err.Error(), "unsafe_builds_as_host_root")):
				t.Errorf("got %v, want a refusal naming [build] userns_mode and unsafe_builds_as_host_root", err)
			case !tt.refused && err != nil:
				t.Errorf("refused: %v", err)
			}
		})
	}
}
