//go:build !race

package gate

// raceEnabled reports a -race build (see race_on_test.go).
const raceEnabled = false
