package integration

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDockerOptionsInsideTheJob: the docker executor's options, set in the
// driver config, are seen from inside the job container as a job would
// see them: a tmpfs of the configured size, /dev/shm's size, the extra
// /etc/hosts line, resolv.conf's server and search domain, a dropped
// capability gone from the effective set, a device node, a namespaced
// sysctl and a ulimit.
func TestDockerOptionsInsideTheJob(t *testing.T) {
	t.Parallel()
	r := newRunner(t, `
tmpfs = {"/scratch" = "rw,size=8m"}
shm_size = 33554432
extra_hosts = ["registry.ci:10.1.2.3"]
dns = ["10.0.0.53"]
dns_search = ["ci.internal"]
cap_drop = ["NET_RAW"]
devices = ["/dev/null:/dev/testnull:rw"]
sysctls = {"net.ipv4.ip_unprivileged_port_start" = "99"}
ulimit = {"nofile" = "512:1024"}
`)
	j := r.newJob(uniqueID(60))
	j.Scripts["build_script"] = `
echo "scratch $(df -k /scratch | awk 'NR==2 {print $2}')"
echo "shm $(df -k /dev/shm | awk 'NR==2 {print $2}')"
grep registry.ci /etc/hosts
grep -E '^(nameserver|search)' /etc/resolv.conf
grep CapEff /proc/self/status
test -c /dev/testnull && echo "device ok"
echo "port_start $(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)"
echo "nofile $(ulimit -n) $(ulimit -Hn)"
`
	jr := r.runJob(j)
	out := jr.stages["build_script"].out
	if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
		t.Fatalf("job failed:\n%s", jr.log)
	}
	for _, want := range []string{"scratch 8192", "shm 32768", "10.1.2.3", "registry.ci", "nameserver 10.0.0.53",
		"ci.internal", "device ok", "port_start 99", "nofile 512 1024"} {
		if !strings.Contains(out, want) {
			t.Errorf("build_script output lacks %q:\n%s", want, out)
		}
	}
	const capNetRaw = 13
	if eff, ok := capEff(out); !ok {
		t.Errorf("no CapEff line:\n%s", out)
	} else if eff&(1<<capNetRaw) != 0 {
		t.Errorf("CAP_NET_RAW still effective (CapEff %x)", eff)
	} else if eff == 0 {
		t.Errorf("no capability left at all (CapEff 0): cap_drop dropped more than NET_RAW")
	}
	r.assertGone(j)
}

// capEff reads the CapEff mask from /proc/self/status lines in out.
func capEff(out string) (uint64, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// TestDockerOptionsInsideAService: a service container gets the docker
// executor's service options -- services_tmpfs (not the job's tmpfs),
// dns, dns_search, extra_hosts, shm_size -- and not the job's device, as
// the service sees them itself (its own output, read from its log).
func TestDockerOptionsInsideAService(t *testing.T) {
	t.Parallel()
	r := newRunner(t, `
tmpfs = {"/scratch" = "rw,size=8m"}
services_tmpfs = {"/db" = "rw,size=4m"}
shm_size = "16m"
extra_hosts = ["registry.ci:10.1.2.3"]
dns = ["10.0.0.53"]
dns_search = ["ci.internal"]
devices = ["/dev/null:/dev/testnull"]
`)
	j := r.newJob(uniqueID(62))
	probe := `echo "db $(df -k /db | awk 'NR==2 {print $2}')"; echo "scratch $(df -k /scratch | awk 'NR==2 {print $2}')"; ` +
		`echo "shm $(df -k /dev/shm | awk 'NR==2 {print $2}')"; grep -E '^(nameserver|search)' /etc/resolv.conf; grep registry.ci /etc/hosts; ` +
		`test -e /dev/testnull && echo "job device here"; echo probe-done; sleep 3600`
	svc, err := json.Marshal([]map[string]any{{"name": shared.image, "alias": "probe", "entrypoint": []string{"sh", "-c"}, "command": []string{probe}}})
	if err != nil {
		t.Fatal(err)
	}
	j.Services = string(svc)
	r.config(j)
	prep := r.call(j, "prepare")
	defer func() {
		if c := r.call(j, "cleanup"); c.code != 0 {
			t.Errorf("cleanup: %s", c.out)
		}
		r.assertGone(j)
	}()
	if prep.code != 0 {
		t.Fatalf("prepare failed:\n%s", prep.out)
	}
	// The probe runs as the service starts, before the job container;
	// on a loaded machine its output may still be on its way.
	var out string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out, "probe-done"); {
		logs, err := shared.engine.Logs(context.Background(), j.name()+"-svc0", 20)
		if err != nil {
			t.Fatal(err)
		}
		out = strings.Join(logs, "\n")
		if time.Now().After(deadline) {
			t.Fatalf("the service's probe did not finish in 30 s:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"db 4096", "shm 16384", "nameserver 10.0.0.53", "ci.internal", "10.1.2.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("service output lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"scratch 8192", "job device here"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("service got a job-only option (%q):\n%s", unwanted, out)
		}
	}
}
