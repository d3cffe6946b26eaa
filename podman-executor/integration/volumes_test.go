package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestVolumeOptions: the driver's volumes are read by podman's own parser,
// so :Z (SELinux relabel; a no-op without SELinux), :U (chown to the
// container's user) and :O (overlay: writes stay in the container) work.
func TestVolumeOptions(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"z", "u", "o"} {
		dirs[d] = filepath.Join(base, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
		if d == "o" { // the job's user writes to the overlay
			if err := os.Chmod(dirs[d], 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dirs[d], "from-host"), []byte("host-"+d+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newRunner(t, fmt.Sprintf("volumes = [%q, %q, %q]\n", dirs["z"]+":/z:Z", dirs["u"]+":/u:U", dirs["o"]+":/o:O"))
	j := r.newJob(uniqueID(40))
	j.setResponse(t, fmt.Sprintf(`{"id":%s,"image":{"name":%q,"executor_opts":{"docker":{"user":"1234:1234"}}}}`, j.ID, j.Image))
	j.Scripts["build_script"] = "cat /z/from-host\n" +
		"echo by-job > /u/written && echo u-writable\n" +
		"echo by-job > /o/written && cat /o/written /o/from-host\n"
	jr := r.runJob(j)
	if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
		t.Fatalf("job failed:\n%s", jr.log)
	}
	for _, want := range []string{"host-z", "u-writable", "by-job\nhost-o"} {
		if !strings.Contains(jr.stages["build_script"].out, want) {
			t.Errorf("build_script output lacks %q:\n%s", want, jr.stages["build_script"].out)
		}
	}
	if st, err := os.Stat(dirs["u"]); err != nil || st.Sys().(*syscall.Stat_t).Uid != 1234 {
		t.Errorf(":U did not chown the host directory to the container's user: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirs["o"], "written")); !os.IsNotExist(err) {
		t.Errorf(":O let a write through to the host: %v", err)
	}
	r.assertGone(j)
}
