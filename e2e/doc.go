// Package e2e holds the end-to-end tests of `depsd serve`: the daemon (in
// process, or the real depsd binary as a subprocess) against the fake GitLab
// of gitlab/gitlabtest, over real HTTP in both directions. The fake runs
// simulated pipelines and posts real-format webhooks to the daemon's
// listener; the daemon scans the fake, creates pipelines through its REST
// API and polls it. The package has no code of its own; see its _test files.
//
// What it holds: whole-system tests and benchmarks
// (`depsd serve` as a process); `e2e/realchain_test.go` (`make e2e-real`):
// base → ruby → app and a diamond built by real buildah jobs (each
// project's `.gitlab-ci.yml` one include of the build component,
// `templates`) under the real GitLab Runner and podman-executor, ordered
// and verified by the depsd binary across a kill -9, a stale member
// rebuilt without cache, a validation build on a candidate image, a member
// pinning its base by digest moved by a merge request and built by its
// merge, then the dashboard's Freshness and chain pages checked in
// Chromium with the registry's digests
package e2e
