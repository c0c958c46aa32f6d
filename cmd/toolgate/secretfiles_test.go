//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"

	"toolgate/internal/config"
	"toolgate/internal/privfile"
)

// TestPreflightUsesCheckedTokenBytes: an approver's token file replaced by
// a symlink to a file every user may write (0644), at the moment the old
// code read it (after its lstat check) or right after the new code opened
// it, cannot put its token in force: the token serve authenticates with is
// the one read from the descriptor that was checked.
func TestPreflightUsesCheckedTokenBytes(t *testing.T) {
	const checked, planted = "checked-approver-token-5c1e77", "planted-approver-token-9d2a31"
	for _, tc := range []struct {
		name string
		// swap sets up sys to replace the token file at path with a
		// symlink to evil at the chosen moment.
		swap func(sys *system, path, evil string)
	}{
		{"when read after the check", func(sys *system, path, evil string) {
			read := sys.readFile
			sys.readFile = func(p string) ([]byte, error) {
				if p == path {
					relink(t, p, evil)
				}
				return read(p)
			}
		}},
		{"right after the open", func(sys *system, path, evil string) {
			sys.openPrivate = func(p string) (*os.File, error) {
				f, err := privfile.OpenNoFollow(p)
				if p == path {
					relink(t, p, evil)
				}
				return f, err
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "alice.token")
			if err := os.WriteFile(path, []byte(checked+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			evil := filepath.Join(dir, "planted")
			if err := os.WriteFile(evil, []byte(planted+"\n"), 0o644); err != nil { //nolint:gosec // G306: the planted file under test
				t.Fatal(err)
			}
			if err := os.Chmod(evil, 0o644); err != nil {
				t.Fatal(err)
			}
			cfgPath := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+`
agents:
  - { id: agent-1, token_env: CMD_TEST_AGENT_TOKEN }
approvers:
  - { id: alice, token_file: `+path+`, roles: [admin] }
policy: { default: allow }
`)
			sys := testSystem(nil)
			cfg, err := config.LoadFile(cfgPath, sys.lookupEnv)
			if err != nil {
				t.Fatal(err)
			}
			tc.swap(&sys, path, evil)
			p, err := preflight(cfg, serveFlags{}, sys, sys.files(cfg))
			if err != nil {
				t.Fatalf("preflight: %v", err)
			}
			if _, ok := p.creds[config.TokenHash(planted)]; ok {
				t.Errorf("the planted file's token is in force")
			}
			if c, ok := p.creds[config.TokenHash(checked)]; !ok || c.Principal.ID != "alice" {
				t.Errorf("the checked file's token is not alice's: %v, %v", c, ok)
			}
		})
	}
}

// relink replaces path by a symlink to target, as a user who may write to
// its directory could.
func relink(t *testing.T, path, target string) {
	t.Helper()
	tmp := path + ".swap"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
