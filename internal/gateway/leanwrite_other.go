//go:build !linux

package gateway

import "net"

// writeNow writes p on conn within quickWriteTimeout (see
// parkedStream.held): outside Linux there is no non-blocking write of
// the socket here.
func writeNow(conn net.Conn, p []byte) error {
	return writeQuick(conn, p)
}
