//go:build !linux

package httpserve

import "net"

// hasUnread is false where the socket is not peeked (see unread_linux.go):
// an idle connection is evicted whatever its socket holds.
func hasUnread(net.Conn) bool { return false }

// awaitByte does not wait where the socket is not peeked: the caller
// reads as usual.
func awaitByte(net.Conn) error { return errNoPeek }

// canPeek: no hand-off of idle connections where the socket is not
// peeked (handoff.go).
const canPeek = false
