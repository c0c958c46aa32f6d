package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
)

func TestServeUnixSocket(t *testing.T) {
	path := filepath.Join(privateDir(t), "admin.sock")
	ln, err := api.Listen(t.Context(), "unix://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v, %v", fi, err)
	}
	// A second listener on a live socket is refused.
	if _, err := api.Listen(t.Context(), "unix://"+path); err == nil {
		t.Fatal("second Listen on a live socket succeeded")
	}

	ctx, cancel := context.WithCancel(t.Context())
	s := api.New(apitest.New(time.Now), nil, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()

	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://toolgate/healthz", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("healthz over unix socket: %d %s", resp.StatusCode, body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left behind: %v", err)
	}
}

func TestListenRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(privateDir(t), "admin.sock")
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// Simulate a crash: close without unlinking.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket file: %v", err)
	}
	ln, err = api.Listen(t.Context(), "unix://"+path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()
}

func TestListenRejectsRelativeSocket(t *testing.T) {
	if _, err := api.Listen(t.Context(), "unix://rel/admin.sock"); err == nil {
		t.Fatal("relative socket path accepted")
	}
}

func TestNilAuthenticatorRejects(t *testing.T) {
	e := newEnv(t)
	s := api.New(e.fake, nil, nil)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer anything")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != 401 {
		t.Errorf("status = %d, want 401", w.Code)
	}
}
