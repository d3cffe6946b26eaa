//go:build race

package e2e_test

// raceEnabled: the suite runs under -race, so the depsd binary it starts is
// built with -race too. It then reuses the packages the test binary just
// compiled, and a data race in the real process fails the test (exit 66).
const raceEnabled = true
