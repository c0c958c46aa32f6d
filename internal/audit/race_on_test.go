//go:build race

package audit

// raceEnabled reports a -race build: the race detector's instrumentation
// allocates more, so allocation counts meant for the real binary do not
// hold.
const raceEnabled = true
