//go:build !linux

package gateway

import "syscall"

// h1Supported: without h1Peek, HTTP upstreams go through net/http's
// Transport only (rawhttpconn.go).
const h1Supported = false

func h1Peek(syscall.RawConn) h1PeekState { return h1Gone }
