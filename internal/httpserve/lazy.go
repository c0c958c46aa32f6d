package httpserve

import (
	"net"
	"time"
)

// Read deadlines handed down only when a read waits (issue 13, front49).
//
// Per kept-alive request on the agent listener the read deadline is set
// about nine times: net/http's idle wait, the hand-off's grace wait and
// back (handoff.go), net/http's read-header deadline and its clearing
// once the headers are read, the body's read timeout and its clearing at
// the body's end (serve.go), net/http's abort of its background read and
// the clearing after it. Each set takes the runtime's poll descriptor lock
// and moves its timer. Most of them are replaced before any read waits
// under them: the request's bytes are in net/http's buffer already. A
// lazyDeadline keeps the deadline asked for and sets it on the connection
// below only when a read is to start (or at once when a read is in
// flight, which the deadline must reach: the abort). A read thus waits
// under the deadline last asked for before it, as before; nothing waits
// under one asked for and replaced while no read was in flight.

// lazyDeadline is the read deadline asked for (want) and the one set on
// the connection below (set, valid when setOK), and the reads in flight.
// Its owner guards it.
type lazyDeadline struct {
	want, set time.Time
	setOK     bool
	reading   int
}

// flushLocked sets the deadline asked for on under unless it is set
// there already.
func (d *lazyDeadline) flushLocked(under net.Conn) error {
	if d.setOK && d.set.Equal(d.want) {
		return nil
	}
	if err := under.SetReadDeadline(d.want); err != nil {
		d.setOK = false
		return err
	}
	d.set, d.setOK = d.want, true
	return nil
}
