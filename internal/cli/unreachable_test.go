package cli_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// TestAgentListenerAtTheAddress: pointed at the agent listener (port 7070
// instead of 7071), every admin path is "no such route"; the error asks
// whether the address is the admin listener.
func TestAgentListenerAtTheAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such route"}}`)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t)
	e.vars[cli.EnvAddr] = srv.URL
	code, _, errs := e.run(t, "list")
	if code != 1 || !strings.Contains(errs, "404 not_found: no such route") || !strings.Contains(errs, "is "+srv.URL+" toolgate's admin listener") {
		t.Errorf("exit %d, stderr %q; want 1 and a question about the admin listener", code, errs)
	}
}
