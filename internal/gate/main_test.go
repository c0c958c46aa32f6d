package gate

import (
	"os"
	"testing"
)

// TestMain runs the package's tests with held calls waited for on the
// gate's events (heldasync.go) instead of a goroutine each when
// TOOLGATE_HELD_EVENTS=1: every held-call test then runs that path too.
func TestMain(m *testing.M) {
	heldEventsInTests = os.Getenv("TOOLGATE_HELD_EVENTS") == "1"
	os.Exit(m.Run())
}
