//go:build race

package gate

// raceEnabled reports a -race build: the race detector doubles the
// runtime's stack guard and grows frames, so stack bounds meant for the
// real binary do not hold.
const raceEnabled = true
