package httpserve

import (
	"math/rand/v2"
	"net"
	"time"
)

// TCP keep-alive out of step (issue 13, branch keepalive).
//
// net.ListenConfig gives every accepted connection the same keep-alive:
// the first probe after 15 s of silence, then one every 15 s. A held call
// parked off net/http (gateway's leanpark.go) writes nothing until it is
// answered, so its connection is silent for the whole hold and carries
// only keep-alive probes. Ten thousand agents that connected in one burst
// then probe in step: the kernel's timer wheel fires timers 15 s away in
// buckets of 256–512 ms, so each bucket's probes (and the other end's)
// are queued in one go. On loopback they overflowed the per-CPU backlog
// (net.core.netdev_max_backlog, 1,000 by default): drops every 15 s, of
// the same size each time (docs/performance.md, "Keep-alive probes in
// step"). A connection that loses its probe nine times in a row is
// aborted (ETIMEDOUT: the agent's "read: connection timed out").
//
// A SpreadKeepAlive listener gives each connection its own idle time,
// drawn from [base, 2·base) in whole seconds (the kernel's unit), so
// that the first probes of a burst of connections spread over base and
// their periods differ (an answered probe is sent again after the idle
// time): the probes of ten thousand connections drift apart instead of
// coming in one bucket. Unanswered probes are sent again every base, and
// keepAliveCount of them unanswered close the connection, as before: a
// vanished peer is noticed within 2·base + keepAliveCount·base (Go's
// default: within base + keepAliveCount·base).

// keepAliveCount is how many unanswered probes close a connection (Go's
// default, TCP_KEEPCNT 9).
const keepAliveCount = 9

// SpreadKeepAlive returns ln with TCP keep-alive on each connection it
// accepts, its idle time drawn per connection (see above). ln should come
// from a net.ListenConfig with KeepAlive -1, so that the connections get
// their keep-alive set once. Connections other than *net.TCPConn are
// passed through. base must be at least a second.
func SpreadKeepAlive(ln net.Listener, base time.Duration) net.Listener {
	return &keepAliveListener{Listener: ln, base: base.Truncate(time.Second)}
}

type keepAliveListener struct {
	net.Listener
	base time.Duration
}

func (l *keepAliveListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// As net's own accept does, an error here leaves the connection
		// without keep-alive rather than refusing it: keep-alive only
		// notices a peer that vanished without a word.
		_ = tc.SetKeepAliveConfig(spreadKeepAlive(l.base, rand.N[time.Duration]))
	}
	return c, nil
}

// spreadKeepAlive is the keep-alive of one connection: idle base plus
// draw(base) rounded down to whole seconds (draw(n) is in [0, n)).
func spreadKeepAlive(base time.Duration, draw func(time.Duration) time.Duration) net.KeepAliveConfig {
	extra := time.Duration(0)
	if base >= 2*time.Second {
		extra = draw(base).Truncate(time.Second)
	}
	return net.KeepAliveConfig{Enable: true, Idle: base + extra, Interval: base, Count: keepAliveCount}
}
