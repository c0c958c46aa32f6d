//go:build !linux

package gateway

import (
	"net"
	"syscall"
)

// h1Supported: without h1Peeker, HTTP upstreams go through net/http's
// Transport only (rawhttpconn.go).
const h1Supported = false

// A h1Peeker sees every connection as gone (nothing goes lean).
type h1Peeker struct{}

func (*h1Peeker) peek(syscall.RawConn) h1PeekState { return h1Gone }

func h1Peek(syscall.RawConn) h1PeekState { return h1Gone }

// An h1Awaiter is never used (nothing goes lean).
type h1Awaiter struct{}

func (*h1Awaiter) write(net.Conn, syscall.RawConn, []byte) (int, error) { return 0, nil }
