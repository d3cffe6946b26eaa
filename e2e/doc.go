// Package e2e holds the end-to-end tests of `depsd serve`: the daemon (in
// process, or the real depsd binary as a subprocess) against the fake GitLab
// of gitlab/gitlabtest, over real HTTP in both directions. The fake runs
// simulated pipelines and posts real-format webhooks to the daemon's
// listener; the daemon scans the fake, creates pipelines through its REST
// API and polls it. The package has no code of its own; see its _test files.
package e2e
