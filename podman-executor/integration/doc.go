// Package integration runs the compiled podman-executor against a real
// podman service, driven by a harness that calls it the way gitlab-runner
// does, and (runner*_test.go) by the real GitLab Runner
// ($DEPSD_GITLAB_RUNNER) against a fake of GitLab's jobs API. It holds
// tests and benchmarks only; see README.md for how to start the podman
// service they need (.ci/podman.sh start).
package integration
