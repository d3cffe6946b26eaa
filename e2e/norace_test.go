//go:build !race

package e2e_test

// raceEnabled: see race_test.go.
const raceEnabled = false
