//go:build !linux

package gateway

import "syscall"

// h1Supported: without h1Alive's peek, HTTP upstreams go through
// net/http's Transport only (rawhttpconn.go).
const h1Supported = false

func h1Alive(syscall.RawConn) bool { return false }
