//go:build !linux

package gateway

import (
	"errors"
	"log/slog"
	"net"
)

// connPoller has no shared poller outside Linux: each parked call's
// connection is watched by a reader goroutine of its own (connWatch).
type connPoller struct{}

func newConnPoller(*slog.Logger) (*connPoller, error) {
	return nil, errors.New("no shared poller on this platform")
}

func (*connPoller) run()      {}
func (*connPoller) stopLoop() {}

func (*connPoller) watch(net.Conn, func()) (dropWatch, bool) { return nil, false }

func (*connPoller) watchIdle(net.Conn, func(), func(), func()) (idleWatch, bool) { return nil, false }
