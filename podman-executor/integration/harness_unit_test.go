package integration

import "testing"

func TestExpected(t *testing.T) {
	tests := []struct {
		component string
		env       map[string]string
		want      string
	}{
		{"podman", nil, ""},
		{"podman", map[string]string{"CI": "true"}, "CI=true"},
		{"podman", map[string]string{"CONTAINER_HOST": "unix:///x"}, "CONTAINER_HOST=unix:///x"},
		{"docker-registry", map[string]string{"CONTAINER_HOST": "unix:///x"}, ""},
		{"docker-registry", map[string]string{"DEPSD_REQUIRE": "podman, docker-registry"}, "DEPSD_REQUIRE=podman, docker-registry"},
		{"podman", map[string]string{"DEPSD_REQUIRE": "all"}, "DEPSD_REQUIRE=all"},
		{"podman", map[string]string{"CI": "false"}, ""},
	}
	for _, tt := range tests {
		if got := expected(tt.component, func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("expected(%s, %v) = %q, want %q", tt.component, tt.env, got, tt.want)
		}
	}
}
