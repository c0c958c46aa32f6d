package api_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
)

// privateDir returns a new directory of mode 0700 owned by this process.
func privateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sock")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckSocketDir(t *testing.T) {
	euid := os.Geteuid()
	tests := []struct {
		name  string
		setup func(t *testing.T) string // returns the directory to check
		euid  int
		want  string // substring of the error; "" for nil
	}{
		{name: "private", setup: privateDir, euid: euid},
		{name: "mode 0755", euid: euid, want: "has mode 0755; want 0700", setup: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			chmod(t, d, 0o755)
			return d
		}},
		{name: "mode 0750", euid: euid, want: "has mode 0750; want 0700", setup: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			chmod(t, d, 0o750)
			return d
		}},
		{name: "mode 0701", euid: euid, want: "has mode 0701; want 0700", setup: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			chmod(t, d, 0o701)
			return d
		}},
		{name: "mode 0500", euid: euid, want: "has mode 0500; want 0700", setup: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			chmod(t, d, 0o500)
			t.Cleanup(func() { _ = os.Chmod(d, 0o700) })
			return d
		}},
		{name: "symlink to a private directory", euid: euid, want: "is a symlink", setup: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			link := filepath.Join(filepath.Dir(d), "link")
			symlink(t, d, link)
			return link
		}},
		{name: "symlinked parent", euid: euid, want: "has a symlink in its path", setup: func(t *testing.T) string {
			t.Helper()
			base := t.TempDir()
			if err := os.Mkdir(filepath.Join(base, "real"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(base, "real", "sock"), 0o700); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(base, "real"), filepath.Join(base, "alias"))
			return filepath.Join(base, "alias", "sock")
		}},
		{name: "relative", euid: euid, want: "not an absolute, clean path", setup: func(*testing.T) string { return "run/toolgate" }},
		{name: "unclean", euid: euid, want: "not an absolute, clean path", setup: func(t *testing.T) string {
			t.Helper()
			return privateDir(t) + "/../sock"
		}},
		{name: "missing", euid: euid, want: "no such file or directory", setup: func(t *testing.T) string {
			t.Helper()
			return filepath.Join(t.TempDir(), "absent")
		}},
		{name: "regular file", euid: euid, want: "is not a directory", setup: func(t *testing.T) string {
			t.Helper()
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o700); err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{name: "other owner", euid: euid + 1, want: "want " + strconv.Itoa(euid+1) + " (the service user)", setup: privateDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t)
			err := api.CheckSocketDir(dir, tt.euid)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckSocketDir(%s) = %v, want nil", dir, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckSocketDir(%s) = %v, want an error containing %q", dir, err, tt.want)
			}
			if !errors.Is(err, api.ErrUnsafeSocketDir) {
				t.Errorf("error %v does not match ErrUnsafeSocketDir", err)
			}
		})
	}
}

func TestListenRefusesUnsafeDir(t *testing.T) {
	euid := os.Geteuid()
	tests := []struct {
		name  string
		addr  func(t *testing.T) string
		geteu func() int
		want  string
	}{
		{name: "mode 0755", want: "has mode 0755; want 0700", addr: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			chmod(t, d, 0o755)
			return "unix://" + filepath.Join(d, "admin.sock")
		}},
		{name: "symlinked directory", want: "is a symlink", addr: func(t *testing.T) string {
			t.Helper()
			d := privateDir(t)
			link := filepath.Join(filepath.Dir(d), "link")
			symlink(t, d, link)
			return "unix://" + filepath.Join(link, "admin.sock")
		}},
		{name: "relative", want: `socket path "rel/admin.sock" is relative`, addr: func(*testing.T) string { return "unix://rel/admin.sock" }},
		{name: "other owner", want: "is owned by uid", geteu: func() int { return euid + 1 }, addr: func(t *testing.T) string {
			t.Helper()
			return "unix://" + filepath.Join(privateDir(t), "admin.sock")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tt.addr(t)
			lc := &api.ListenConfig{Geteuid: tt.geteu}
			if err := lc.Check(addr); err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, api.ErrUnsafeSocketDir) {
				t.Errorf("Check(%s) = %v, want ErrUnsafeSocketDir containing %q", addr, err, tt.want)
			}
			ln, err := lc.Listen(t.Context(), addr)
			if err == nil {
				ln.Close()
				t.Fatalf("Listen(%s) succeeded", addr)
			}
			if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, api.ErrUnsafeSocketDir) {
				t.Errorf("Listen(%s) = %v, want ErrUnsafeSocketDir containing %q", addr, err, tt.want)
			}
			if path, ok := strings.CutPrefix(addr, "unix://"); ok && filepath.IsAbs(path) {
				if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("socket file created despite the refusal: %v", err)
				}
			}
		})
	}
}

func TestListenTCPUnchecked(t *testing.T) {
	lc := &api.ListenConfig{Geteuid: func() int { return -1 }}
	if err := lc.Check("127.0.0.1:0"); err != nil {
		t.Errorf("Check(tcp) = %v, want nil", err)
	}
	ln, err := lc.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}

// lockedBuffer is a bytes.Buffer safe for the server's goroutines to write
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestListenRechecksDirOnEveryConnection(t *testing.T) {
	dir := privateDir(t)
	path := filepath.Join(dir, "admin.sock")
	var logs lockedBuffer
	var euid atomic.Int64
	euid.Store(int64(os.Geteuid()))
	lc := &api.ListenConfig{
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Geteuid: func() int { return int(euid.Load()) },
	}
	ln, err := lc.Listen(t.Context(), "unix://"+path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- api.New(apitest.New(time.Now), nil, nil).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// Every request dials a new connection, so every request is checked.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	healthz := func() error {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://toolgate/healthz", nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %s", resp.Status)
		}
		return nil
	}
	steps := []struct {
		name    string
		change  func(t *testing.T)
		refused string // substring of the logged reason; "" if served
	}{
		{name: "private", change: func(*testing.T) {}},
		{name: "chmod 0755", change: func(t *testing.T) { t.Helper(); chmod(t, dir, 0o755) }, refused: "has mode 0755; want 0700"},
		{name: "chmod back", change: func(t *testing.T) { t.Helper(); chmod(t, dir, 0o700) }},
		{name: "other owner", change: func(*testing.T) { euid.Add(1) }, refused: "is owned by uid"},
		{name: "owner back", change: func(*testing.T) { euid.Add(-1) }},
		{name: "directory swapped for a symlink", refused: "is a symlink", change: func(t *testing.T) {
			t.Helper()
			moved := dir + "-moved"
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			symlink(t, moved, dir)
		}},
	}
	for _, st := range steps {
		st.change(t)
		before := len(logs.String())
		err := healthz()
		if st.refused == "" {
			if err != nil {
				t.Fatalf("%s: request refused: %v\nlog:\n%s", st.name, err, logs.String())
			}
			continue
		}
		if err == nil {
			t.Fatalf("%s: request served, want the connection refused", st.name)
		}
		if got := logs.String()[before:]; !strings.Contains(got, "admin connection refused") || !strings.Contains(got, st.refused) {
			t.Errorf("%s: log %q, want the refusal naming %q", st.name, got, st.refused)
		}
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
