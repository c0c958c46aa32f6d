package main

import (
	"fmt"
	"syscall"
)

// deferAcceptSeconds is the TCP_DEFER_ACCEPT of the agent listener: how
// long (seconds; the kernel rounds it up to SYN-ACK retransmission periods,
// 1 + 2 + 4 s) a connection that sends nothing stays with the kernel
// before it is accepted all the same, at its SYN-ACK resent about 7 s
// after the handshake. A client that writes within it (an HTTP
// client writes its request right after the handshake) is accepted with
// its first bytes already there.
const deferAcceptSeconds = 5

// deferAccept is a net.ListenConfig.Control that sets TCP_DEFER_ACCEPT on
// the listening socket: the kernel hands a connection to accept(2) only
// once its first data arrived (or a FIN, or after deferAcceptSeconds).
// Until then it costs the process nothing: no goroutine in net/http
// waiting for a request line, no bufio buffers, no stack. In a burst of
// thousands of held calls, the connections accepted before their request
// was sent were most of the admission's goroutines (1,507 of 2,276 at
// the SQLite 10k run's admission peak: docs/performance.md, "admit36").
// Where the kernel refuses the option (a sandbox's or an emulation layer's
// TCP), the socket is left as it is and connections are accepted at their
// handshake, as outside Linux: the deferral saves memory, and is no reason
// for serve not to start (attack36).
func deferAccept(_, _ string, c syscall.RawConn) error {
	if err := c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, deferAcceptSeconds) //nolint:gosec // a socket fd fits an int
	}); err != nil {
		return fmt.Errorf("defer accept: %w", err)
	}
	return nil
}
