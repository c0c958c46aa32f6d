package gate

import (
	"sync"
	"time"
)

// refusalLogEvery is how often refusalLog lets a refusal of one (rule,
// principal) be logged again after its first.
const refusalLogEvery = time.Minute

// refusalLogMax bounds the (rule, principal) pairs refusalLog remembers.
// Once it holds that many, the pairs not logged within refusalLogEvery are
// forgotten (at most one sweep per refusalLogEvery; their unlogged counts
// go to the pool); a new pair that still finds it full is not remembered:
// its refusals are counted in the pool, which has one line per
// refusalLogEvery like a pair (pooled).
const refusalLogMax = 4096

// refusalLog thins the WARN log line of the refusals of one kind (the
// gate's quorum refusals): an agent retrying a refused call in a loop
// would otherwise write a line per call. The first refusal per (rule,
// principal) is logged, then at most one per refusalLogEvery, which
// carries the count of refusals since the last line. Its memory is
// bounded (refusalLogMax pairs), whatever the number of principals
// (sessions are principals of their own). The zero value is ready; it is
// safe for concurrent use. Each Gate owns one.
type refusalLog struct {
	mu    sync.Mutex
	seen  map[refusalKey]*refusalCount
	swept time.Time    // when seen was last swept of idle pairs
	pool  refusalCount // refusals of the pairs seen had no room for, and the unlogged counts of forgotten ones
}

type refusalKey struct{ rule, principal string }

type refusalCount struct {
	logged time.Time // when the last line was written
	n      int       // refusals since then, this one included
}

// due counts one refusal of principal's call by rule at now and reports
// whether to log it, with n the refusals the line stands for (1 for the
// first; the count since the last line, this one included, after).
// pooled is true when the line stands for the pool (refusalLogMax): the
// refusals of pairs not remembered, of which this call is one.
func (l *refusalLog) due(rule, principal string, now time.Time) (n int, ok, pooled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[refusalKey]*refusalCount{}
	}
	k := refusalKey{rule, principal}
	c := l.seen[k]
	if c == nil {
		if len(l.seen) >= refusalLogMax && now.Sub(l.swept) >= refusalLogEvery {
			l.swept = now
			for old, oc := range l.seen {
				if now.Sub(oc.logged) >= refusalLogEvery {
					l.pool.n += oc.n // counted, never logged: the pool's next line carries them
					delete(l.seen, old)
				}
			}
		}
		if len(l.seen) < refusalLogMax {
			l.seen[k] = &refusalCount{logged: now}
			return 1, true, false
		}
		c, pooled = &l.pool, true
	}
	c.n++
	if !c.logged.IsZero() && now.Sub(c.logged) < refusalLogEvery {
		return 0, false, pooled
	}
	n, c.n, c.logged = c.n, 0, now
	return n, true, pooled
}

// unlogged returns, and forgets, the refusals counted but not yet logged
// (n) and how many (rule, principal) pairs they are of, the pool counting
// as one: what a shutdown would otherwise lose.
func (l *refusalLog) unlogged() (pairs, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.seen {
		if c.n > 0 {
			pairs, n = pairs+1, n+c.n
			c.n = 0
		}
	}
	if l.pool.n > 0 {
		pairs, n = pairs+1, n+l.pool.n
		l.pool.n = 0
	}
	return pairs, n
}
