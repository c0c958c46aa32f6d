//go:build race

package api

// raceEnabled reports a -race build: the race detector's instrumentation
// allocates more, and sync.Pool drops some of what is put in it, so
// allocation bounds meant for the real binary do not hold.
const raceEnabled = true
