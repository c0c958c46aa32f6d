package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// socketConfig returns a config whose admin API listens on admin (a
// "unix://" address), with SQLite at db, the test agent, and approver bob
// whose token is read from tokenFile.
func socketConfig(db, admin, tokenFile string) string {
	return `
listen:
  mcp: 127.0.0.1:0
  admin: ` + q(admin) + `
storage:
  driver: sqlite
  path: ` + q(db) + `
agents:
  - id: ` + agentID + `
    token_env: E2E_AGENT_TOKEN
approvers:
  - id: ` + approverID + `
    token_file: ` + q(tokenFile) + `
    roles: [approver]
`
}

// privateSocketDir returns a new directory of mode 0700 (t.TempDir's are
// 0755) and the approver token file beside it, mode 0600.
func privateSocketDir(t *testing.T) (dir, tokenFile string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile = filepath.Join(base, "bob.token")
	if err := os.WriteFile(tokenFile, []byte(approverToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, tokenFile
}

// TestSocketRefusesToStart checks that `toolgate serve` exits 2, naming the
// problem, when the admin socket's directory is not private to the service
// user (mode 0755, a symlink, a relative path) or an approver token file is
// readable by others (issue 6, "Out of the agent's reach").
func TestSocketRefusesToStart(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) (admin, tokenFile string)
		want  string // in stderr
	}{
		{
			name: "directory mode 0755",
			setup: func(t *testing.T) (string, string) {
				t.Helper()
				dir, tok := privateSocketDir(t)
				if err := os.Chmod(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				return "unix://" + filepath.Join(dir, "toolgate.sock"), tok
			},
			want: "has mode 0755; want 0700",
		},
		{
			name: "symlinked directory",
			setup: func(t *testing.T) (string, string) {
				t.Helper()
				dir, tok := privateSocketDir(t)
				link := filepath.Join(filepath.Dir(dir), "link")
				if err := os.Symlink(dir, link); err != nil {
					t.Fatal(err)
				}
				return "unix://" + filepath.Join(link, "toolgate.sock"), tok
			},
			want: "is a symlink; want a real directory",
		},
		{
			name: "relative path",
			setup: func(t *testing.T) (string, string) {
				t.Helper()
				_, tok := privateSocketDir(t)
				return "unix://run/toolgate.sock", tok
			},
			want: `socket path "run/toolgate.sock" is relative`,
		},
		{
			name: "approver token file mode 0644",
			setup: func(t *testing.T) (string, string) {
				t.Helper()
				dir, tok := privateSocketDir(t)
				if err := os.Chmod(tok, 0o644); err != nil {
					t.Fatal(err)
				}
				return "unix://" + filepath.Join(dir, "toolgate.sock"), tok
			},
			want: "bob.token has mode 0644; want 0600",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin, tok := tt.setup(t)
			code, stderr := refuseToStart(t, socketConfig(filepath.Join(t.TempDir(), "toolgate.db"), admin, tok), nil)
			if code != 2 {
				t.Errorf("toolgate serve exited %d, want 2\nstderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr does not name the problem (%q):\n%s", tt.want, stderr)
			}
		})
	}
}

// TestSocketCLI checks that the CLI, as a separate process, reaches the
// admin API over the Unix socket named by TOOLGATE_ADDR=unix:///…, with the
// approver's token read from a private token file; that a connection made
// while the socket directory is not private is refused (and logged); and
// that the socket works again once the directory is private again.
func TestSocketCLI(t *testing.T) {
	dir, tok := privateSocketDir(t)
	admin := "unix://" + filepath.Join(dir, "toolgate.sock")
	g := startGateway(t, socketConfig(filepath.Join(t.TempDir(), "toolgate.db"), admin, tok), nil)
	if g.Admin != admin {
		t.Fatalf("ready file names admin %q, want %q", g.Admin, admin)
	}
	t.Logf("approvals list over the socket:\n%s", mustCLI(t, g.Admin, "list"))

	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, g.Admin, "list"); r.Code == 0 {
		t.Errorf("approvals list succeeded while the socket directory was 0755:\n%s", r.Stdout)
	}
	// The gateway's stderr reaches the buffer through a pipe: poll for it.
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
		log := g.stderr.String()
		if strings.Contains(log, "admin connection refused") && strings.Contains(log, "has mode 0755; want 0700") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway log does not report the refused connection after %v:\n%s", waitFor(t), log)
		}
	}

	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, g.Admin, "list")
}
