//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSecretFileProblemsSaidOnce: `policy check` and `serve` name each
// approver token file or notification secret file that is missing, not
// a regular file (a FIFO, which must not hang either) or readable by
// others exactly once: the privacy check and the read are one open
// (package privfile), where they were two and a missing file was said
// twice (once by the check, once by the read). An agent's token_file that
// is a FIFO or longer than 64 KiB is refused too (on a33a630b a FIFO hung
// both commands: agents' files were read with os.ReadFile), while one of
// mode 0644 is read: an agent may own its token file.
func TestSecretFileProblemsSaidOnce(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "alice.token")
	fifo := filepath.Join(dir, "bob.token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	agentFIFO := filepath.Join(dir, "agent-2.token")
	if err := syscall.Mkfifo(agentFIFO, 0o644); err != nil {
		t.Fatal(err)
	}
	agentBig := writeFile(t, filepath.Join(dir, "agent-3.token"), strings.Repeat("t", 64<<10+1))
	agentShared := writeFile(t, filepath.Join(dir, "agent-4.token"), strings.Repeat("u", 32)+"\n")
	if err := os.Chmod(agentShared, 0o644); err != nil {
		t.Fatal(err)
	}
	open := writeFile(t, filepath.Join(dir, "hook.url"), "https://hooks.example/x\n")
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, filepath.Join(dir, "toolgate.yaml"), `listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }
storage: { path: `+filepath.Join(dir, "db", "toolgate.db")+` }
agents:
  - { id: agent-1, token_env: E2E_AGENT_TOKEN }
  - { id: agent-2, token_file: `+agentFIFO+` }
  - { id: agent-3, token_file: `+agentBig+` }
  - { id: agent-4, token_file: `+agentShared+` }
approvers:
  - { id: alice, token_file: `+missing+`, roles: [admin] }
  - { id: bob, token_file: `+fifo+`, roles: [admin] }
notify:
  channels:
    - { name: hook, type: webhook, url_file: `+open+`, secret_env: E2E_HOOK_SECRET }
policy: { default: allow }
`)
	env := map[string]string{"E2E_AGENT_TOKEN": agentToken, "E2E_HOOK_SECRET": strings.Repeat("s", 32)}
	want := []string{
		`approvers[0] "alice": token_file ` + missing + `: no such file or directory: correct the path, or create the file holding the secret (mode 0600)`,
		`approvers[1] "bob": token_file ` + fifo + ` is not a regular file`,
		`notify.channels[0] "hook": url_file ` + open + ` has mode 0644; want 0600 (no group or other bits)`,
		`agents[1] "agent-2": token_file ` + agentFIFO + ` is not a regular file`,
		`agents[2] "agent-3": token_file ` + agentBig + ` is longer than 65536 bytes`,
	}
	for _, args := range [][]string{{"policy", "check", cfg}, {"serve", "--config", cfg}} {
		res := runToolgateEnv(t, env, args...)
		if res.Code != 2 {
			t.Errorf("toolgate %s: exit %d, want 2\nstderr:\n%s", strings.Join(args, " "), res.Code, res.Stderr)
		}
		if strings.Contains(res.Stderr, agentShared) {
			t.Errorf("toolgate %s refuses agent-4's token file of mode 0644\nstderr:\n%s", strings.Join(args, " "), res.Stderr)
		}
		for i, path := range []string{missing, fifo, open, agentFIFO, agentBig} {
			if n := strings.Count(res.Stderr, path); n != 1 || !strings.Contains(res.Stderr, want[i]) {
				t.Errorf("toolgate %s names %s %d times, want once as %q\nstderr:\n%s", strings.Join(args, " "), path, n, want[i], res.Stderr)
			}
		}
	}
}
