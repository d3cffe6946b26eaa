//go:build !race

package gitlab

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
