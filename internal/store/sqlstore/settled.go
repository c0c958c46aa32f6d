package sqlstore

import (
	"sync/atomic"
	"time"
)

// settledState is what the SQLite watch knows about the store's commits,
// for Settled: a generation that moves whenever a poll saw another
// connection's commit (PRAGMA data_version moved) or failed, and when the
// last poll succeeded (monotonic, since base).
type settledState struct {
	base  time.Time
	gen   atomic.Uint64
	okAt  atomic.Int64 // nanoseconds since base of the last successful poll; 0: none
	every time.Duration
}

// polled records one poll of the watch: changed when it saw a commit (or
// had no earlier reading to compare with), err when it failed.
func (s *settledState) polled(changed bool, err error) {
	if err != nil || changed {
		s.gen.Add(1)
	}
	if err == nil {
		s.okAt.Store(max(1, int64(time.Since(s.base))))
	}
}

// settledStale is how many watch intervals may pass since its last
// successful poll before Settled stops vouching for the store: a watch that
// is stuck or stopped notices no commit.
const settledStale = 4

// Settled returns a generation of the store's commits and whether it is
// current. While the SQLite watch (Watch, WatchLog, WatchLogTouched) runs
// and its last poll succeeded within a few intervals (settledStale), the
// generation moves with every commit of any connection, of this process or
// another, that the watch saw, within one interval (250 ms by default) of
// the commit, and with every failed poll: equal generations, both current,
// mean that no commit was seen in between and the store answered. Callers
// that poll the store only to see whether anything changed (the gate's
// pending count, the audit trail's look for events) skip the poll while
// the generation is current and unchanged since their last successful one
// (docs/performance.md, branch idle27).
// On Postgres, or when no watch runs, ok is false: poll as before.
func (db *DB) Settled() (gen uint64, ok bool) {
	s := db.settled
	if s == nil {
		return 0, false
	}
	at := s.okAt.Load()
	if at == 0 || time.Since(s.base)-time.Duration(at) > settledStale*s.every {
		return s.gen.Load(), false
	}
	return s.gen.Load(), true
}
