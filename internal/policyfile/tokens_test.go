package policyfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token rotated in its file is read only at start: a reload (SIGHUP,
// --watch) must say that the new token is not in force yet, though no key
// of the file changed.
func TestReloadWarnsOfRotatedToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "bob.token")
	writeToken := func(tok string) {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("old-token-0123456789abcdef")
	text := allowEcho + `
approvers:
  - { id: bob, token_file: ` + tokenFile + `, roles: [admin] }
`
	f := setup(t, text, nil)

	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(f.log.String(), "tokens") {
		t.Fatalf("token warning with no token changed:\n%s", f.log)
	}

	writeToken("new-token-0123456789abcdef")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	const want = `agent or approver tokens changed (approver \"bob\"); a reload applies only the policy`
	if !strings.Contains(f.log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, f.log)
	}
	if strings.Contains(f.log.String(), "token-0123456789") {
		t.Errorf("log shows a token:\n%s", f.log)
	}

	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.log.String(), "a restart would refuse to start") {
		t.Errorf("no warning that the token file is gone:\n%s", f.log)
	}
}
