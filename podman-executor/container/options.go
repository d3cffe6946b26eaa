package container

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containers/common/pkg/capabilities"
	"github.com/containers/common/pkg/parse"
	podmanparse "github.com/containers/podman/v4/cmd/podman/parse"
	"github.com/containers/podman/v4/libpod/define"
	"github.com/containers/podman/v4/pkg/namespaces"
	"github.com/containers/podman/v4/pkg/specgen"
	"github.com/containers/podman/v4/pkg/specgenutil"
	"github.com/containers/podman/v4/pkg/util"
	"github.com/docker/go-units"
	spec "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Options are the container options GitLab's docker executor offers
// under [runners.docker], as the driver config writes them. They are read
// by podman's own parsers (those of `podman run`): Check reports the
// first bad value naming its key, and Create applies them. The zero value
// changes nothing.
type Options struct {
	// Devices are `--device` specs: "/dev/fuse", "/dev/a:/dev/b:rwm".
	Devices []string
	// CapAdd and CapDrop are capability names, with or without CAP_, or ALL.
	CapAdd  []string
	CapDrop []string
	// SecurityOpt are `--security-opt` values: label=disable,
	// seccomp=unconfined, apparmor=..., no-new-privileges, mask=...,
	// unmask=..., proc-opts=..., systempaths=unconfined.
	SecurityOpt []string
	// UserNS is `--userns`: "auto", "auto:size=65536", "keep-id", "host",
	// "private", "ns:/path", "nomap"; "" is podman's default.
	UserNS string
	// IDMap maps container IDs to host IDs for both users and groups,
	// as podman's --uidmap and --gidmap read it ("0:1073741824:65536"),
	// in a private user namespace; it excludes UserNS.
	IDMap string
	// Tmpfs maps a container path to its tmpfs options ("rw,size=64m").
	Tmpfs map[string]string
	// ShmSize is /dev/shm's size in bytes (0: podman's default).
	ShmSize int64
	// DNS servers (IP addresses) and DNSSearch domains for resolv.conf.
	DNS       []string
	DNSSearch []string
	// ExtraHosts are /etc/hosts lines, "name:ip" (or "name:host-gateway").
	ExtraHosts []string
	// Sysctls are namespaced kernel parameters podman allows (net.*,
	// fs.mqueue.*, kernel.shm*, kernel.msg*, kernel.sem).
	Sysctls map[string]string
	// Ulimits maps a limit name (nofile, nproc, ...) to "soft:hard" or one
	// value for both.
	Ulimits map[string]string
	// OOMKillDisable keeps the kernel's OOM killer off the container.
	OOMKillDisable bool
	// Env are more environment variables (the build profile's).
	Env map[string]string
}

// Check reads every option with podman's parsers and returns the first
// error, naming the option's config key and the bad value.
func (o Options) Check() error {
	_, err := o.generator("")
	return err
}

// CheckTmpfs checks tmpfs mounts (path → options) under a config key
// other than tmpfs (services_tmpfs).
func CheckTmpfs(key string, tmpfs map[string]string) error {
	for _, dest := range sortedKeys(tmpfs) {
		if _, err := tmpfsMount(dest, tmpfs[dest]); err != nil {
			return optionError(key, dest+"="+tmpfs[dest], err)
		}
	}
	return nil
}

// Merge returns o with more's lists appended, its maps and single values
// set over o's.
func (o Options) Merge(more Options) Options {
	out := o
	out.Devices = appendNew(o.Devices, more.Devices)
	out.CapAdd = appendNew(o.CapAdd, more.CapAdd)
	out.CapDrop = appendNew(o.CapDrop, more.CapDrop)
	out.SecurityOpt = appendNew(o.SecurityOpt, more.SecurityOpt)
	out.DNS = appendNew(o.DNS, more.DNS)
	out.DNSSearch = appendNew(o.DNSSearch, more.DNSSearch)
	out.ExtraHosts = appendNew(o.ExtraHosts, more.ExtraHosts)
	out.Tmpfs = mergeMaps(o.Tmpfs, more.Tmpfs)
	out.Sysctls = mergeMaps(o.Sysctls, more.Sysctls)
	out.Ulimits = mergeMaps(o.Ulimits, more.Ulimits)
	out.Env = mergeMaps(o.Env, more.Env)
	if more.UserNS != "" || more.IDMap != "" {
		out.UserNS, out.IDMap = more.UserNS, more.IDMap
	}
	if more.ShmSize != 0 {
		out.ShmSize = more.ShmSize
	}
	out.OOMKillDisable = o.OOMKillDisable || more.OOMKillDisable
	return out
}

// appendNew appends what is not in a already.
func appendNew(a, b []string) []string {
	out := slices.Clone(a)
	for _, v := range b {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func mergeMaps(a, b map[string]string) map[string]string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// apply sets o on g, which Create then sends to podman.
func (o Options) apply(g *specgen.SpecGenerator) error {
	p, err := o.generator(g.Name)
	if err != nil {
		return err
	}
	g.Devices = append(g.Devices, p.Devices...)
	g.CapAdd = append(g.CapAdd, p.CapAdd...)
	g.CapDrop = append(g.CapDrop, p.CapDrop...)
	g.ContainerSecurityConfig.SelinuxOpts = append(g.SelinuxOpts, p.SelinuxOpts...)
	g.ApparmorProfile = cmpOr(p.ApparmorProfile, g.ApparmorProfile)
	g.SeccompProfilePath = cmpOr(p.SeccompProfilePath, g.SeccompProfilePath)
	g.Mask = append(g.Mask, p.Mask...)
	g.Unmask = append(g.Unmask, p.Unmask...)
	g.NoNewPrivileges = g.NoNewPrivileges || p.NoNewPrivileges
	for k, v := range p.Annotations { // as podman run records them, for podman inspect
		if g.Annotations == nil {
			g.Annotations = map[string]string{}
		}
		g.Annotations[k] = v
	}
	if p.ProcOpts != nil {
		g.ProcOpts = p.ProcOpts
	}
	if p.UserNS.NSMode != "" {
		g.UserNS, g.IDMappings = p.UserNS, p.IDMappings
	}
	g.Mounts = append(g.Mounts, p.Mounts...)
	if p.ShmSize != nil {
		g.ShmSize = p.ShmSize
	}
	g.DNSServers = append(g.DNSServers, p.DNSServers...)
	g.DNSSearch = append(g.DNSSearch, p.DNSSearch...)
	g.HostAdd = append(g.HostAdd, p.HostAdd...)
	if len(p.Sysctl) > 0 {
		if g.Sysctl == nil {
			g.Sysctl = map[string]string{}
		}
		for k, v := range p.Sysctl {
			g.Sysctl[k] = v
		}
	}
	g.Rlimits = append(g.Rlimits, p.Rlimits...)
	if len(p.Rlimits) > 0 {
		g.Rlimits = append(g.Rlimits, ownRlimits(o.Ulimits)...)
	}
	if len(o.Env) > 0 {
		if g.Env == nil {
			g.Env = map[string]string{}
		}
		for k, v := range o.Env {
			g.Env[k] = v
		}
	}
	if o.OOMKillDisable {
		if g.ResourceLimits == nil {
			g.ResourceLimits = &spec.LinuxResources{}
		}
		if g.ResourceLimits.Memory == nil {
			g.ResourceLimits.Memory = &spec.LinuxMemory{}
		}
		t := true
		g.ResourceLimits.Memory.DisableOOMKiller = &t
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// optionError names the config key and the value podman refused.
func optionError(key, value string, err error) error {
	return fmt.Errorf("%s %q: %w", key, value, err)
}

// generator reads o into a fresh SpecGenerator, the way `podman run` reads
// its flags (pkg/specgenutil's FillOutSpecGen, whose other work -- reading
// this host's containers.conf -- is the podman service's business here).
func (o Options) generator(name string) (*specgen.SpecGenerator, error) {
	g := specgen.NewSpecGenerator("", false)
	g.Name = name
	g.Annotations = map[string]string{}
	for _, d := range o.Devices {
		src, _, _, err := parse.Device(d)
		if err != nil {
			return nil, optionError("devices", d, err)
		}
		if !strings.HasPrefix(src, "/") {
			return nil, optionError("devices", d, errors.New("want a host path such as /dev/fuse"))
		}
		g.Devices = append(g.Devices, spec.LinuxDevice{Path: d})
	}
	var err error
	if g.CapAdd, err = capabilityList("cap_add", o.CapAdd); err != nil {
		return nil, err
	}
	if g.CapDrop, err = capabilityList("cap_drop", o.CapDrop); err != nil {
		return nil, err
	}
	for _, opt := range o.SecurityOpt {
		if err := securityOpt(g, opt); err != nil {
			return nil, optionError("security_opt", opt, err)
		}
	}
	if o.UserNS != "" {
		if g.UserNS, err = specgen.ParseUserNamespace(o.UserNS); err != nil {
			return nil, optionError("userns_mode", o.UserNS, err)
		}
		// As setNamespaces in pkg/specgenutil: auto's options (size,
		// uidmapping, gidmapping) become the ID mappings.
		if g.IDMappings, err = util.ParseIDMapping(namespaces.UsernsMode(o.UserNS), nil, nil, "", ""); err != nil {
			return nil, optionError("userns_mode", o.UserNS, err)
		}
		if g.UserNS.NSMode == specgen.Auto {
			g.IDMappings.AutoUserNs = true
		}
	}
	if o.IDMap != "" {
		if o.UserNS != "" {
			return nil, optionError("userns_mode", o.UserNS, errors.New("excludes an ID map"))
		}
		if g.IDMappings, err = util.ParseIDMapping(namespaces.UsernsMode(""), []string{o.IDMap}, []string{o.IDMap}, "", ""); err != nil {
			return nil, optionError("uidmap", o.IDMap, err)
		}
		g.UserNS = specgen.Namespace{NSMode: specgen.Private}
	}
	for _, dest := range sortedKeys(o.Tmpfs) {
		m, err := tmpfsMount(dest, o.Tmpfs[dest])
		if err != nil {
			return nil, optionError("tmpfs", dest+"="+o.Tmpfs[dest], err)
		}
		g.Mounts = append(g.Mounts, m)
	}
	if o.ShmSize < 0 {
		return nil, optionError("shm_size", strconv.FormatInt(o.ShmSize, 10), errors.New("must not be negative"))
	}
	if o.ShmSize > 0 {
		size := o.ShmSize
		g.ShmSize = &size
	}
	for _, d := range o.DNS {
		ip := net.ParseIP(strings.TrimSpace(d))
		if ip == nil {
			return nil, optionError("dns", d, errors.New("not an IP address"))
		}
		g.DNSServers = append(g.DNSServers, ip)
	}
	for _, d := range o.DNSSearch {
		if d == "" || strings.ContainsAny(d, " \t,") {
			return nil, optionError("dns_search", d, errors.New("not a domain name"))
		}
		g.DNSSearch = append(g.DNSSearch, d)
	}
	for _, h := range o.ExtraHosts {
		if _, err := podmanparse.ValidateExtraHost(h); err != nil {
			return nil, optionError("extra_hosts", h, err)
		}
		g.HostAdd = append(g.HostAdd, h)
	}
	if len(o.Sysctls) > 0 {
		kv := make([]string, 0, len(o.Sysctls))
		for _, k := range sortedKeys(o.Sysctls) {
			kv = append(kv, k+"="+o.Sysctls[k])
		}
		for _, s := range kv {
			if _, err := util.ValidateSysctls([]string{s}); err != nil {
				return nil, optionError("sysctls", s, err)
			}
		}
		g.Sysctl, _ = util.ValidateSysctls(kv)
	}
	for _, name := range sortedKeys(o.Ulimits) {
		u := name + "=" + o.Ulimits[name]
		rl, err := specgenutil.GenRlimits([]string{u})
		if err != nil || len(rl) == 0 {
			if err == nil {
				err = errors.New("not a limit")
			}
			return nil, optionError("ulimit", u, err)
		}
		g.Rlimits = append(g.Rlimits, rl...)
	}
	return g, nil
}

// capabilityList normalizes capability names as podman does (CAP_ added,
// upper case), refusing unknown ones.
func capabilityList(key string, caps []string) ([]string, error) {
	if len(caps) == 0 {
		return nil, nil
	}
	for _, c := range caps {
		if _, err := capabilities.NormalizeCapabilities([]string{c}); err != nil {
			return nil, optionError(key, c, err)
		}
	}
	return capabilities.NormalizeCapabilities(caps)
}

// tmpfsMount is a tmpfs at dest with options opts ("rw,size=64m"), checked
// as podman's --tmpfs and the podman service check them.
func tmpfsMount(dest, opts string) (spec.Mount, error) {
	if err := parse.ValidateVolumeCtrDir(dest); err != nil {
		return spec.Mount{}, err
	}
	var options []string
	if opts != "" {
		options = strings.Split(opts, ",")
	}
	if _, err := util.ProcessOptions(options, true, ""); err != nil {
		return spec.Mount{}, err
	}
	for _, o := range options {
		if k, v, ok := strings.Cut(o, "="); ok && k == "size" {
			if _, err := sizeOption(v); err != nil {
				return spec.Mount{}, fmt.Errorf("size %q: %w", v, err)
			}
		}
	}
	return spec.Mount{Destination: dest, Type: define.TypeTmpfs, Source: define.TypeTmpfs, Options: options}, nil
}

// securityOpt reads one --security-opt value onto g, as FillOutSpecGen in
// podman's pkg/specgenutil does (which offers no function for one value).
// Docker's deprecated "key:value" form is accepted, as podman does.
func securityOpt(g *specgen.SpecGenerator, opt string) error {
	var con []string
	if strings.Contains(opt, "=") {
		con = strings.SplitN(opt, "=", 2)
	} else {
		con = strings.SplitN(opt, ":", 2)
	}
	if len(con) != 2 && con[0] != "no-new-privileges" {
		return errors.New("want KEY=VALUE")
	}
	switch con[0] {
	case "apparmor":
		g.ApparmorProfile = con[1]
		g.Annotations[define.InspectAnnotationApparmor] = con[1]
	case "label":
		switch v, _, _ := strings.Cut(con[1], ":"); v {
		case "disable", "user", "role", "type", "level", "filetype":
		default:
			return fmt.Errorf("unknown label option %q: want disable, user:, role:, type:, level: or filetype:", con[1])
		}
		g.SelinuxOpts = append(g.SelinuxOpts, con[1])
		g.Annotations[define.InspectAnnotationLabel] = strings.Join(g.SelinuxOpts, ",label=")
	case "mask":
		g.Mask = append(g.Mask, strings.Split(con[1], ":")...)
	case "proc-opts":
		g.ProcOpts = strings.Split(con[1], ",")
	case "seccomp":
		g.SeccompProfilePath = con[1]
		g.Annotations[define.InspectAnnotationSeccomp] = con[1]
	case "systempaths":
		if con[1] != "unconfined" {
			return errors.New("only systempaths=unconfined is supported")
		}
		g.Unmask = append(g.Unmask, "ALL")
	case "unmask":
		g.Unmask = append(g.Unmask, con[1:]...)
	case "no-new-privileges":
		v := true
		if len(con) == 2 {
			var err error
			if v, err = strconv.ParseBool(con[1]); err != nil {
				return errors.New("no-new-privileges takes true or false")
			}
		}
		g.NoNewPrivileges = v
	default:
		return fmt.Errorf("unknown option %q: want apparmor, label, mask, no-new-privileges, proc-opts, seccomp, systempaths or unmask", con[0])
	}
	return nil
}

// ownRlimits are this process's nofile and nproc limits for those of the
// two that ulimits leaves out. A podman service (4.3, Debian's) given any
// rlimit drops containers.conf's default_ulimits and, for a rootful
// container, raises nofile and nproc to 1048576, which a host with lower
// hard limits refuses ("error setting rlimit ... operation not
// permitted"); the driver's own limits are what a job gets without
// ulimit on such a host.
func ownRlimits(ulimits map[string]string) []spec.POSIXRlimit {
	var out []spec.POSIXRlimit
	for name, res := range map[string]int{"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC} {
		if _, ok := ulimits[name]; ok {
			continue
		}
		var l unix.Rlimit
		if err := unix.Getrlimit(res, &l); err != nil {
			continue
		}
		out = append(out, spec.POSIXRlimit{Type: name, Soft: l.Cur, Hard: l.Max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// sizeOption reads a tmpfs size as podman does: bytes with an optional
// unit (64m, 1g) or a percentage of memory (50%).
func sizeOption(v string) (int64, error) {
	if n, ok := strings.CutSuffix(v, "%"); ok {
		p, err := strconv.ParseUint(n, 10, 8)
		if err != nil || p == 0 || p > 100 {
			return 0, errors.New("want a percentage from 1% to 100%")
		}
		return 0, nil
	}
	n, err := units.RAMInBytes(v)
	if err != nil || n <= 0 {
		return 0, errors.New("want a size such as 64m or 1g")
	}
	return n, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
