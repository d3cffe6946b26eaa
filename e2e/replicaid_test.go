package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/daemon"
)

// An operator gives a second `depsd serve` the --replica-id of a running
// one (a copied deployment): the second exits with status 1 and says which
// id, which process holds it and what to do; the first goes on serving and
// leading, the only live replica.
func TestServeRefusesTheReplicaIDOfARunningProcess(t *testing.T) {
	srv := newGitLab(t, waves()...)
	first := newServeSetup(t, srv)
	first.start(t, "--replica-id", "same")
	status := func() daemon.Status {
		t.Helper()
		resp, err := first.client.Get("http://" + first.listen + "/api/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st daemon.Status
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status: %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	var incarnation string
	if !eventually(stepTimeout, func() bool {
		st := status()
		if len(st.Replicas) == 1 && st.Leading {
			incarnation = st.Replicas[0].Incarnation
		}
		return incarnation != ""
	}) {
		t.Fatalf("the first process does not lead under one liveness lease: %+v", status())
	}

	// The second one, on another port, shares the first one's state.
	second := newServeSetup(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), chainTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, depsdBinary(t), "serve", "--group", scopeGroup, "--listen", second.listen,
		"--leader-lease", "3s", "--replica-id", "same")
	cmd.Dir = second.dir
	cmd.Env = append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN="+srv.Token,
		"DEPSD_STATE="+filepath.Join(first.dir, "depsd.db"), "DEPSD_WEBHOOK_SECRET="+secret,
		"DEPSD_CONFIG="+filepath.Join(second.dir, "depsd.yaml"), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second depsd serve under the same replica id: %v (%v), want exit status 1\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{`replica id "same" is already used by another running depsd serve`, incarnation,
		"give each replica its own --replica-id, or leave it unset"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("its output does not say %q:\n%s", want, out)
		}
	}
	if st := status(); !st.Leading || len(st.Replicas) != 1 || st.Replicas[0].Incarnation != incarnation {
		t.Errorf("the first process after the second exited: leading %v, replicas %+v; want it leading, alone",
			st.Leading, st.Replicas)
	}
}
