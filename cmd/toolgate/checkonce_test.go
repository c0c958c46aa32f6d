package main

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingSecretFilesSaidOnce: a missing approver token_file and a
// missing notification secret_file are each one problem, in `policy check`
// and in serve's refusal: the privacy check leaves a missing file to the
// read, which names it without repeating the path ("open …:"). Before, each
// was said twice, once by each.
func TestMissingSecretFilesSaidOnce(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "bob.token")
	secretFile := filepath.Join(dir, "hook.secret")
	cfg := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n" + `
agents:
  - { id: agent-1, token_env: CMD_TEST_AGENT_TOKEN }
approvers:
  - { id: bob, token_file: ` + tokenFile + `, roles: [approver] }
notify:
  channels:
    - { name: hook, type: webhook, url_env: CMD_TEST_HOOK_URL, secret_file: ` + secretFile + ` }
`
	path := writeConfig(t, cfg)
	sys := testSystem(map[string]string{"CMD_TEST_HOOK_URL": "https://hooks.example/x"})
	want := []string{
		`approvers[0] "bob": token_file ` + tokenFile + `: no such file or directory`,
		`notify.channels[0] "hook": secret_file ` + secretFile + `: no such file or directory`,
	}
	var stdout, stderr strings.Builder
	code := checkCmd([]string{path}, &stdout, &stderr, sys)
	if code != 2 {
		t.Errorf("policy check exited %d, want 2\nstderr:\n%s", code, stderr.String())
	}
	err := serveWith(t.Context(), []string{"--config", path},
		serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, sys: sys})
	if !errors.Is(err, errConfig) {
		t.Fatalf("serve = %v, want an invalid-config error (exit 2)", err)
	}
	for name, out := range map[string]string{"policy check": stderr.String(), "serve": err.Error()} {
		for _, w := range want {
			if n := strings.Count(out, w); n != 1 {
				t.Errorf("%s says %q %d times, want once:\n%s", name, w, n, out)
			}
		}
		for _, f := range []string{tokenFile, secretFile} {
			if n := strings.Count(out, f); n != 1 {
				t.Errorf("%s names %s %d times, want once:\n%s", name, f, n, out)
			}
		}
	}
	if !strings.Contains(stderr.String(), "2 problem(s)") {
		t.Errorf("policy check does not count 2 problems:\n%s", stderr.String())
	}
}
