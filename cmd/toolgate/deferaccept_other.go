//go:build !linux

package main

import "syscall"

// deferAccept sets nothing outside Linux (see deferaccept_linux.go): a
// connection is accepted when its handshake completes.
func deferAccept(_, _ string, _ syscall.RawConn) error { return nil }
