//go:build race

package gateway

// raceEnabled reports a -race build: sync.Pool drops a share of what is
// put back at random there, so tests counting a pool's reuse skip.
const raceEnabled = true
