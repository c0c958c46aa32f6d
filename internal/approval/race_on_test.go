//go:build race

package approval

// raceEnabled reports a -race build: sync.Pool drops items under the race
// detector, so regexp allocates a matcher per match and allocation bounds
// meant for the real binary do not hold.
const raceEnabled = true
