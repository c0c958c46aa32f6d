package cli_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestAuditExportWithNoGatewayAtTheAddress: audit export asks, as list
// does, whether serve runs at the address (it read only "connection
// refused").
func TestAuditExportWithNoGatewayAtTheAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	var out, errb strings.Builder
	env := map[string]string{cli.EnvAddr: closed, cli.EnvToken: "tok"}
	if code := cli.RunAuditExport(t.Context(), nil, &out, &errb, func(k string) string { return env[k] }); code != cli.ExitFailure {
		t.Errorf("exit %d, want %d", code, cli.ExitFailure)
	}
	for _, want := range []string{"is toolgate serve running", closed, "--addr or TOOLGATE_ADDR"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q, want it to contain %q", errb.String(), want)
		}
	}
}

// TestWatchWithNoGatewayAtTheAddress: watch keeps retrying when nothing
// listens (the gateway may be starting), and each retry's note asks, as
// list does, whether serve runs at that address (a new user started watch
// before serve and read only "connection refused").
func TestWatchWithNoGatewayAtTheAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	saw := make(chan struct{})
	status := &noteWriter{saw: saw, want: "reconnecting in"}
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"watch"}, io.Discard, status, func(k string) string {
			return map[string]string{cli.EnvAddr: closed, cli.EnvToken: tokAlic}[k]
		})
	}()
	select {
	case <-saw: // the first failed attempt's note
	case <-time.After(30 * time.Second):
		t.Fatalf("no retry note from watch; stderr %q", status.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("watch exited %d after it was interrupted, want 0", code)
	}
	for _, want := range []string{"the event stream failed", "is toolgate serve running", closed, "--addr or TOOLGATE_ADDR"} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("stderr %q, want it to contain %q", status.String(), want)
		}
	}
}

// noteWriter collects what it is given and closes saw once that contains
// want.
type noteWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	saw  chan struct{}
}

func (w *noteWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.saw != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.saw)
		w.saw = nil
	}
	return len(p), nil
}

func (w *noteWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
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
