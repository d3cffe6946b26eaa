package container

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/containers/podman/v4/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// TestOptionsReachTheSpec: each docker-executor option becomes what
// `podman run` would send for the same flag.
func TestOptionsReachTheSpec(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		check func(t *testing.T, g *specgen.SpecGenerator)
	}{
		{"devices", Options{Devices: []string{"/dev/fuse", "/dev/null:/dev/mynull:rw"}}, func(t *testing.T, g *specgen.SpecGenerator) {
			if len(g.Devices) != 2 || g.Devices[0].Path != "/dev/fuse" || g.Devices[1].Path != "/dev/null:/dev/mynull:rw" {
				t.Errorf("devices %+v", g.Devices)
			}
		}},
		{"capabilities normalized", Options{CapAdd: []string{"sys_admin", "CAP_MKNOD"}, CapDrop: []string{"NET_RAW"}}, func(t *testing.T, g *specgen.SpecGenerator) {
			if !slices.Equal(g.CapAdd, []string{"CAP_MKNOD", "CAP_SYS_ADMIN"}) || !slices.Equal(g.CapDrop, []string{"CAP_NET_RAW"}) {
				t.Errorf("cap_add %v cap_drop %v", g.CapAdd, g.CapDrop)
			}
		}},
		{"security options, docker's colon form too", Options{SecurityOpt: []string{"label=disable", "seccomp:unconfined", "no-new-privileges", "apparmor=unconfined", "unmask=/proc/kcore"}},
			func(t *testing.T, g *specgen.SpecGenerator) {
				if !slices.Equal(g.SelinuxOpts, []string{"disable"}) || g.SeccompProfilePath != "unconfined" || !g.NoNewPrivileges ||
					g.ApparmorProfile != "unconfined" || !slices.Equal(g.Unmask, []string{"/proc/kcore"}) ||
					g.Annotations["io.podman.annotations.label"] != "disable" || g.Annotations["io.podman.annotations.seccomp"] != "unconfined" {
					t.Errorf("security %+v", g.ContainerSecurityConfig)
				}
			}},
		{"userns auto with a size", Options{UserNS: "auto:size=65536"}, func(t *testing.T, g *specgen.SpecGenerator) {
			if g.UserNS.NSMode != specgen.Auto || g.IDMappings == nil || !g.IDMappings.AutoUserNs || g.IDMappings.AutoUserNsOpts.Size != 65536 {
				t.Errorf("userns %+v mappings %+v", g.UserNS, g.IDMappings)
			}
		}},
		{"an ID map for users and groups", Options{IDMap: "0:1073741824:65536"}, func(t *testing.T, g *specgen.SpecGenerator) {
			m := g.IDMappings
			if g.UserNS.NSMode != specgen.Private || m == nil || len(m.UIDMap) != 1 || len(m.GIDMap) != 1 ||
				m.UIDMap[0].ContainerID != 0 || m.UIDMap[0].HostID != 1073741824 || m.UIDMap[0].Size != 65536 || m.GIDMap[0] != m.UIDMap[0] {
				t.Errorf("userns %+v mappings %+v", g.UserNS, m)
			}
		}},
		{"userns host", Options{UserNS: "host"}, func(t *testing.T, g *specgen.SpecGenerator) {
			if g.UserNS.NSMode != specgen.Host {
				t.Errorf("userns %+v", g.UserNS)
			}
		}},
		{"tmpfs with options", Options{Tmpfs: map[string]string{"/scratch": "rw,noexec,size=64m", "/b": ""}}, func(t *testing.T, g *specgen.SpecGenerator) {
			want := []spec.Mount{
				{Destination: "/b", Type: "tmpfs", Source: "tmpfs"},
				{Destination: "/scratch", Type: "tmpfs", Source: "tmpfs", Options: []string{"rw", "noexec", "size=64m"}},
			}
			if len(g.Mounts) != 2 || g.Mounts[0].Destination != want[0].Destination || !slices.Equal(g.Mounts[1].Options, want[1].Options) || g.Mounts[1].Type != "tmpfs" {
				t.Errorf("mounts %+v", g.Mounts)
			}
		}},
		{"shm size", Options{ShmSize: 256 << 20}, func(t *testing.T, g *specgen.SpecGenerator) {
			if g.ShmSize == nil || *g.ShmSize != 256<<20 {
				t.Errorf("shm %v", g.ShmSize)
			}
		}},
		{"dns, search domains, extra hosts", Options{DNS: []string{"10.0.0.53", "fd00::53"}, DNSSearch: []string{"ci.internal"}, ExtraHosts: []string{"registry.ci:10.1.2.3", "gw:host-gateway", "v6:fd00::1"}},
			func(t *testing.T, g *specgen.SpecGenerator) {
				if len(g.DNSServers) != 2 || !g.DNSServers[0].Equal(net.ParseIP("10.0.0.53")) || !slices.Equal(g.DNSSearch, []string{"ci.internal"}) ||
					!slices.Equal(g.HostAdd, []string{"registry.ci:10.1.2.3", "gw:host-gateway", "v6:fd00::1"}) {
					t.Errorf("dns %v search %v hosts %v", g.DNSServers, g.DNSSearch, g.HostAdd)
				}
			}},
		{"sysctls", Options{Sysctls: map[string]string{"net.ipv4.ip_forward": "1", "kernel.shmmax": "1000"}}, func(t *testing.T, g *specgen.SpecGenerator) {
			if g.Sysctl["net.ipv4.ip_forward"] != "1" || g.Sysctl["kernel.shmmax"] != "1000" {
				t.Errorf("sysctl %v", g.Sysctl)
			}
		}},
		{"ulimits, one value or soft:hard", Options{Ulimits: map[string]string{"nofile": "1024:2048", "nproc": "512"}}, func(t *testing.T, g *specgen.SpecGenerator) {
			want := []spec.POSIXRlimit{{Type: "nofile", Soft: 1024, Hard: 2048}, {Type: "nproc", Soft: 512, Hard: 512}}
			if !slices.Equal(g.Rlimits[:2], want) {
				t.Errorf("rlimits %+v, want %+v", g.Rlimits, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := specgen.NewSpecGenerator("img", false)
			if err := tt.opts.apply(g); err != nil {
				t.Fatal(err)
			}
			tt.check(t, g)
		})
	}
}

// TestUlimitKeepsTheOtherLimits: with only nofile set, nproc is this
// process's own (podman 4.3 would otherwise raise it past the host's
// hard limit and the container would not start).
func TestUlimitKeepsTheOtherLimits(t *testing.T) {
	g := specgen.NewSpecGenerator("img", false)
	if err := (Options{Ulimits: map[string]string{"nofile": "512:1024"}}).apply(g); err != nil {
		t.Fatal(err)
	}
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &l); err != nil {
		t.Fatal(err)
	}
	want := []spec.POSIXRlimit{{Type: "nofile", Soft: 512, Hard: 1024}, {Type: "nproc", Soft: l.Cur, Hard: l.Max}}
	if !slices.Equal(g.Rlimits, want) {
		t.Errorf("rlimits %+v, want %+v", g.Rlimits, want)
	}
	g = specgen.NewSpecGenerator("img", false)
	if err := (Options{}).apply(g); err != nil || g.Rlimits != nil {
		t.Errorf("without ulimit: rlimits %+v (%v), want none (podman's defaults)", g.Rlimits, err)
	}
}

func TestOOMKillDisableKeepsTheMemoryLimit(t *testing.T) {
	g := specgen.NewSpecGenerator("img", false)
	limit := int64(1 << 30)
	g.ResourceLimits = &spec.LinuxResources{Memory: &spec.LinuxMemory{Limit: &limit}}
	if err := (Options{OOMKillDisable: true}).apply(g); err != nil {
		t.Fatal(err)
	}
	m := g.ResourceLimits.Memory
	if m.DisableOOMKiller == nil || !*m.DisableOOMKiller || m.Limit == nil || *m.Limit != limit {
		t.Errorf("memory %+v", m)
	}
}

// TestOptionsRefused: a bad value is refused by podman's parser, and the
// error names the config key and the value, so the operator finds it.
func TestOptionsRefused(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"device mode", Options{Devices: []string{"/dev/fuse:/dev/fuse:rwz"}}, `devices "/dev/fuse:/dev/fuse:rwz"`},
		{"relative device", Options{Devices: []string{"fuse"}}, `devices "fuse"`},
		{"unknown capability", Options{CapAdd: []string{"SYS_ADMIM"}}, `cap_add "SYS_ADMIM"`},
		{"unknown capability to drop", Options{CapDrop: []string{"bogus"}}, `cap_drop "bogus"`},
		{"unknown security option", Options{SecurityOpt: []string{"lable=disable"}}, `security_opt "lable=disable"`},
		{"bad label option", Options{SecurityOpt: []string{"label=off"}}, `security_opt "label=off"`},
		{"security option without value", Options{SecurityOpt: []string{"seccomp"}}, `security_opt "seccomp"`},
		{"userns", Options{UserNS: "sometimes"}, `userns_mode "sometimes"`},
		{"userns auto option", Options{UserNS: "auto:bigsize=1"}, `userns_mode "auto:bigsize=1"`},
		{"ID map", Options{IDMap: "0:x:1"}, `uidmap "0:x:1"`},
		{"ID map and userns", Options{IDMap: "0:1:1", UserNS: "auto"}, `userns_mode "auto"`},
		{"tmpfs relative path", Options{Tmpfs: map[string]string{"scratch": "rw"}}, `tmpfs "scratch=rw"`},
		{"tmpfs option", Options{Tmpfs: map[string]string{"/scratch": "rw,bogus"}}, `tmpfs "/scratch=rw,bogus"`},
		{"tmpfs size", Options{Tmpfs: map[string]string{"/scratch": "size=lots"}}, `tmpfs "/scratch=size=lots"`},
		{"negative shm", Options{ShmSize: -1}, `shm_size "-1"`},
		{"dns name instead of address", Options{DNS: []string{"dns.example"}}, `dns "dns.example"`},
		{"dns search with a space", Options{DNSSearch: []string{"a b"}}, `dns_search "a b"`},
		{"extra host without address", Options{ExtraHosts: []string{"registry"}}, `extra_hosts "registry"`},
		{"extra host bad address", Options{ExtraHosts: []string{"registry:10.0.0"}}, `extra_hosts "registry:10.0.0"`},
		{"sysctl outside the namespace", Options{Sysctls: map[string]string{"kernel.panic": "1"}}, `sysctls "kernel.panic=1"`},
		{"ulimit name", Options{Ulimits: map[string]string{"nofiles": "10"}}, `ulimit "nofiles=10"`},
		{"ulimit soft above hard", Options{Ulimits: map[string]string{"nofile": "20:10"}}, `ulimit "nofile=20:10"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Check()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want an error naming %s", err, tt.want)
			}
			if err := tt.opts.apply(specgen.NewSpecGenerator("img", false)); err == nil {
				t.Error("apply accepted what Check refuses")
			}
		})
	}
}

func TestCheckTmpfsNamesItsKey(t *testing.T) {
	err := CheckTmpfs("services_tmpfs", map[string]string{"/db": "size=huge"})
	if err == nil || !strings.HasPrefix(err.Error(), `services_tmpfs "/db=size=huge"`) {
		t.Errorf("got %v", err)
	}
	if err := CheckTmpfs("services_tmpfs", map[string]string{"/db": "rw,size=50%"}); err != nil {
		t.Errorf("a percentage size: %v", err)
	}
}

func TestMerge(t *testing.T) {
	a := Options{Devices: []string{"/dev/fuse"}, CapAdd: []string{"NET_ADMIN"}, UserNS: "host", Env: map[string]string{"A": "1"}}
	b := Options{Devices: []string{"/dev/fuse", "/dev/kvm"}, CapAdd: []string{"SYS_ADMIN"}, UserNS: "auto", Env: map[string]string{"B": "2"}}
	m := a.Merge(b)
	if !slices.Equal(m.Devices, []string{"/dev/fuse", "/dev/kvm"}) || !slices.Equal(m.CapAdd, []string{"NET_ADMIN", "SYS_ADMIN"}) ||
		m.UserNS != "auto" || m.Env["A"] != "1" || m.Env["B"] != "2" {
		t.Errorf("merged %+v", m)
	}
	if len(a.Devices) != 1 || len(a.Env) != 1 {
		t.Errorf("Merge changed its receiver: %+v", a)
	}
}

// TestBusyRemovalIsErrBusy: podman's "device or resource busy" (EBUSY,
// which reaches the driver as text through the API) is ErrBusy, for the
// caller to retry; other errors are not.
func TestBusyRemovalIsErrBusy(t *testing.T) {
	shm := errors.New("removing container 0e3d root filesystem: 1 error occurred:\n\t* unlinkat /var/lib/containers/storage/overlay-containers/0e3d/userdata/shm: device or resource busy")
	if err := busy(shm); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "userdata/shm") {
		t.Errorf("busy(%q) = %v, want ErrBusy keeping the message", shm, err)
	}
	if err := busy(errors.New("container state improper")); errors.Is(err, ErrBusy) {
		t.Errorf("an improper state is taken as busy: %v", err)
	}
}
