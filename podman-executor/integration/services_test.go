package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/containers/podman/v4/pkg/bindings/images"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// commitImage makes a local image from the test image with Dockerfile-
// style changes (EXPOSE, HEALTHCHECK, ...), removed when the test ends.
func commitImage(t *testing.T, changes ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := bindings.NewConnection(ctx, shared.host)
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprint(time.Now().UnixNano())
	name := "podman-executor-imgtest-" + tag
	if _, err := shared.engine.Create(ctx, container.Spec{Name: name, Image: shared.image, Command: []string{"sh"}}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shared.engine.Remove(context.Background(), name) }()
	repo := "localhost/podman-executor-imgtest"
	opts := new(containers.CommitOptions).WithRepo(repo).WithTag(tag).WithChanges(changes)
	if _, err := containers.Commit(withConn(ctx, conn), name, opts); err != nil {
		t.Fatalf("commit test image: %v", err)
	}
	ref := repo + ":" + tag
	keep := context.WithoutCancel(conn)
	t.Cleanup(func() { _, _ = images.Remove(withConn(context.Background(), keep), []string{ref}, nil) })
	return ref
}

// buildImage builds a local image from the test image with Containerfile
// lines, in docker format (which keeps HEALTHCHECK), with podman's CLI
// against the test service; removed when the test ends.
func buildImage(t *testing.T, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	file := "FROM " + shared.image + "\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("localhost/podman-executor-buildtest:%d", time.Now().UnixNano())
	cmd := exec.Command("podman", "--url", shared.host, "build", "--format", "docker", "-q", "-t", ref, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "--url", shared.host, "rmi", "-f", ref).Run() })
	return ref
}

// TestServiceReadyBeforeTheFirstStage: a service whose port opens seconds
// after it starts is waited for, so the job's first stage reaches it at
// once. Its entrypoint, command, two aliases and a variable from the job
// payload are honoured.
func TestServiceReadyBeforeTheFirstStage(t *testing.T) {
	t.Parallel()
	image := commitImage(t, "EXPOSE 8080", `CMD ["sh"]`)
	r := newRunner(t, "")
	j := r.newJob(uniqueID(20))
	cmd := `echo "$SVC_GREETING" > /var/www/index.html; echo svc-waiting; sleep 8; exec httpd -f -p 8080 -h /var/www`
	j.Services = fmt.Sprintf(`[{"name":%q,"alias":"web,www","entrypoint":["sh","-c"],"command":[%q]}]`, image, cmd)
	j.setResponse(t, fmt.Sprintf(`{"id":%s,"services":[{"name":%q,"alias":"web,www","variables":[{"key":"SVC_GREETING","value":"hello-from-the-service"}]}]}`, j.ID, image))
	j.Scripts["prepare_script"] = "wget -q -O- http://web:8080/ && wget -q -O- http://www:8080/\n"
	jr := r.runJob(j)
	if jr.prepare.code != 0 {
		t.Fatalf("prepare:\n%s", jr.log)
	}
	if !strings.Contains(jr.prepare.out, "Waiting for services to be up and running (timeout 30 seconds)") || strings.Contains(jr.prepare.out, "WARNING") {
		t.Errorf("prepare output:\n%s", jr.prepare.out)
	}
	out := jr.stages["prepare_script"].out
	if jr.stages["prepare_script"].code != 0 || strings.Count(out, "hello-from-the-service") != 2 {
		t.Errorf("first stage did not reach the service on both aliases:\n%s", jr.log)
	}
	r.assertGone(j)
}

// TestServiceNotReadyWarnsWithItsLogs: a service that never listens on
// its exposed port gets a warning with its last log lines, and the job
// goes on.
func TestServiceNotReadyWarnsWithItsLogs(t *testing.T) {
	t.Parallel()
	image := commitImage(t, "EXPOSE 8080")
	r := newRunner(t, "wait_for_services_timeout = 2\n")
	j := r.newJob(uniqueID(21))
	j.Services = fmt.Sprintf(`[{"name":%q,"alias":"idle","command":["sh","-c","echo svc-log-marker; exec sleep 600"]}]`, image)
	jr := r.runJob(j)
	if jr.prepare.code != 0 {
		t.Fatalf("prepare:\n%s", jr.log)
	}
	for _, want := range []string{"*** WARNING: Service " + image + " probably didn't start properly", "nothing listens on TCP port 8080", "svc-log-marker"} {
		if !strings.Contains(jr.prepare.out, want) {
			t.Errorf("prepare output lacks %q:\n%s", want, jr.prepare.out)
		}
	}
	if jr.stages["build_script"].code != 0 {
		t.Errorf("the job did not go on:\n%s", jr.log)
	}
	r.assertGone(j)
}

// TestServiceHealthcheck: a service image with a HEALTHCHECK is waited
// for until healthy.
func TestServiceHealthcheck(t *testing.T) {
	t.Parallel()
	image := buildImage(t, `HEALTHCHECK --interval=1s --retries=1 CMD test -f /tmp/ready`)
	r := newRunner(t, "")
	j := r.newJob(uniqueID(22))
	j.Services = fmt.Sprintf(`[{"name":%q,"alias":"hc","command":["sh","-c","sleep 6; echo healthy-service > /var/www/index.html; touch /tmp/ready; exec httpd -f -p 8080 -h /var/www"]}]`, image)
	j.Scripts["prepare_script"] = "wget -q -O- http://hc:8080/\n"
	jr := r.runJob(j)
	if jr.prepare.code != 0 || strings.Contains(jr.prepare.out, "WARNING") {
		t.Fatalf("prepare:\n%s", jr.log)
	}
	if !strings.Contains(jr.stages["prepare_script"].out, "healthy-service") {
		t.Errorf("first stage ran before the service was healthy:\n%s", jr.log)
	}
	r.assertGone(j)
}
