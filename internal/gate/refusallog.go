package gate

import (
	"sync"
	"time"
)

// refusalLogEvery is how often refusalLog lets a refusal of one (rule,
// principal) be logged again after its first.
const refusalLogEvery = time.Minute

// refusalLogMax bounds the (rule, principal) pairs refusalLog remembers:
// past it, the pairs not logged within refusalLogEvery are forgotten (the
// next refusal of one is logged again as a first).
const refusalLogMax = 4096

// refusalLog thins the WARN log line of the refusals of one kind (the
// gate's quorum refusals): an agent retrying a refused call in a loop
// would otherwise write a line per call. The first refusal per (rule,
// principal) is logged, then at most one per refusalLogEvery, which
// carries the count of refusals since the last line. The zero value is
// ready; it is safe for concurrent use. Each Gate owns one.
type refusalLog struct {
	mu   sync.Mutex
	seen map[refusalKey]*refusalCount
}

type refusalKey struct{ rule, principal string }

type refusalCount struct {
	logged time.Time // when the last line was written
	n      int       // refusals since then, this one included
}

// due counts one refusal of principal's call by rule at now and reports
// whether to log it, with n the refusals the line stands for (1 for the
// first; the count since the last line, this one included, after).
func (l *refusalLog) due(rule, principal string, now time.Time) (n int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[refusalKey]*refusalCount{}
	}
	k := refusalKey{rule, principal}
	c := l.seen[k]
	if c == nil {
		if len(l.seen) >= refusalLogMax {
			for old, oc := range l.seen {
				if now.Sub(oc.logged) >= refusalLogEvery {
					delete(l.seen, old)
				}
			}
		}
		l.seen[k] = &refusalCount{logged: now}
		return 1, true
	}
	c.n++
	if now.Sub(c.logged) < refusalLogEvery {
		return 0, false
	}
	n, c.n, c.logged = c.n, 0, now
	return n, true
}
