package realtest

import (
	"fmt"
	"testing"
)

// recorder stands in for *testing.T to see whether require skips or fails.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func envOf(vars map[string]string) Env {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestRequireSkipsOnlyWhereTheComponentIsNotExpected(t *testing.T) {
	for _, tc := range []struct {
		name      string
		component string
		ok        bool
		env       map[string]string
		want      string // "", "skip" or "fail"
	}{
		{"present", Registry, true, map[string]string{"CI": "true"}, ""},
		{"absent on a laptop", Registry, false, nil, "skip"},
		{"absent in CI", Registry, false, map[string]string{"CI": "true"}, "fail"},
		{"CI=false is not CI", Registry, false, map[string]string{"CI": "false"}, "skip"},
		{"listed in DEPSD_REQUIRE", PostgreSQL, false, map[string]string{"DEPSD_REQUIRE": "chromium, postgresql"}, "fail"},
		{"other component listed", PostgreSQL, false, map[string]string{"DEPSD_REQUIRE": "chromium"}, "skip"},
		{"DEPSD_REQUIRE=all", Chromium, false, map[string]string{"DEPSD_REQUIRE": "all"}, "fail"},
		{"podman with CONTAINER_HOST", Podman, false, map[string]string{"CONTAINER_HOST": "unix:///run/podman.sock"}, "fail"},
		{"CONTAINER_HOST says nothing of the registry", Registry, false, map[string]string{"CONTAINER_HOST": "unix:///x"}, "skip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			require(&r, tc.component, tc.ok, "because", envOf(tc.env))
			got := ""
			switch {
			case r.failed != "" && r.skipped != "":
				t.Fatalf("both failed and skipped: %q / %q", r.failed, r.skipped)
			case r.failed != "":
				got = "fail"
			case r.skipped != "":
				got = "skip"
			}
			if got != tc.want {
				t.Fatalf("got %q (fail %q, skip %q), want %q", got, r.failed, r.skipped, tc.want)
			}
		})
	}
}
