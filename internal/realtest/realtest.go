// Package realtest holds the one rule for tests that need a real component
// (a podman service, the docker-registry binary, a PostgreSQL server,
// Chromium, Prometheus): such a test may skip on a developer's machine that
// lacks the component, but never where the component is expected, because
// a skipped integration test would let CI pass without running it.
//
// The component is expected when CI=true (GitLab CI, GitHub Actions and
// .ci/run set it), when DEPSD_REQUIRE lists it (comma-separated component
// names, or "all"), or when a variable of the component's own says it is
// there (CONTAINER_HOST for podman). Then a missing or unreachable component
// fails the test with the reason instead of skipping it.
package realtest

import (
	"os"
	"strings"
	"testing"
)

// Component names used with Require, one per real dependency of the tests.
const (
	Podman     = "podman"
	Registry   = "docker-registry"
	PostgreSQL = "postgresql"
	Chromium   = "chromium"
	// GitLabRunner is the real GitLab Runner (shared/tools/gitlab-runner),
	// named by DEPSD_GITLAB_RUNNER.
	GitLabRunner = "gitlab-runner"
	// Prometheus: Debian's prometheus package (prometheus and promtool).
	Prometheus = "prometheus"
)

// Env is the environment lookup Require consults; os.LookupEnv in tests.
type Env func(key string) (string, bool)

// Expected reports whether the environment says component must be present,
// and which variable says so.
func Expected(component string, env Env) (bool, string) {
	if v, _ := env("CI"); strings.EqualFold(strings.TrimSpace(v), "true") {
		return true, "CI=true"
	}
	if v, ok := env("DEPSD_REQUIRE"); ok {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if strings.EqualFold(name, "all") || strings.EqualFold(name, component) {
				return true, "DEPSD_REQUIRE=" + v
			}
		}
	}
	for _, key := range ownVariables(component) {
		if v, ok := env(key); ok && v != "" {
			return true, key + " is set"
		}
	}
	return false, ""
}

// ownVariables are the variables whose presence says a component is there.
func ownVariables(component string) []string {
	switch component {
	case Podman:
		return []string{"CONTAINER_HOST"}
	case PostgreSQL:
		return []string{"DEPSD_TEST_POSTGRES"}
	case GitLabRunner:
		return []string{"DEPSD_GITLAB_RUNNER"}
	}
	return nil
}

// Require does nothing when ok. Otherwise it skips t with why, or fails t
// when the environment expects the component (see the package doc). Call it
// right where the component was looked for or reached:
//
//	bin, err := exec.LookPath("docker-registry")
//	realtest.Require(t, realtest.Registry, err == nil, fmt.Sprintf("not installed: %v", err))
func Require(t testing.TB, component string, ok bool, why string) {
	t.Helper()
	require(t, component, ok, why, os.LookupEnv)
}

// failer is the part of testing.TB that require uses, so that its own test
// can watch what it does.
type failer interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

func require(t failer, component string, ok bool, why string, env Env) {
	t.Helper()
	if ok {
		return
	}
	if expected, because := Expected(component, env); expected {
		t.Fatalf("%s is required here (%s) but not usable: %s", component, because, why)
		return
	}
	t.Skipf("%s not usable, test skipped (set CI=true or DEPSD_REQUIRE=%s to make this a failure): %s", component, component, why)
}
