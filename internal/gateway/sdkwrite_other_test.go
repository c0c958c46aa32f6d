//go:build !linux

package gateway

import "errors"

// runStallUpstream is the stall upstream of sdkwrite_linux_test.go, whose
// tests run on Linux only (SIGUSR1 and pipe write deadlines); elsewhere the
// helper process refuses the mode.
func runStallUpstream() error {
	return errors.New("the stdio-stall upstream runs on Linux only")
}
