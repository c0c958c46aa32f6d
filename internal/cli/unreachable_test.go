package cli_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/cli"
)

// TestNoGatewayAtTheAddress: when nothing listens at the admin address (a
// gateway not started, the wrong port, a socket path that does not
// exist), the error names the address and where it came from, not only
// the dial error.
func TestNoGatewayAtTheAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	for _, addr := range []string{closed, "unix://" + filepath.Join(t.TempDir(), "admin.sock")} {
		t.Run(addr[:4], func(t *testing.T) {
			e := newEnv(t)
			e.vars[cli.EnvAddr] = addr
			code, _, errs := e.run(t, "list")
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, want := range []string{"is toolgate serve running", addr, "--addr or TOOLGATE_ADDR"} {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr %q, want it to contain %q", errs, want)
				}
			}
		})
	}
}
