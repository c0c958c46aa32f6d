package httpserve

import (
	"net"

	"toolgate/internal/rawio"
)

// A rawListener's connections are read and written through their
// descriptors without the scheduler's system-call bookkeeping
// (rawio.WrapConn): at one request in flight that keeps the runtime's
// sysmon asleep (docs/performance.md, "cpu25").
type rawListener struct {
	net.Listener
}

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return rawio.WrapConn(c), nil
}
