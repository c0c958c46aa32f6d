package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
)

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

func TestTokenHash(t *testing.T) {
	if got := TokenHash("test"); got != sha {
		t.Errorf("TokenHash(test) = %s, want %s", got, sha)
	}
}

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	bobFile := filepath.Join(dir, "bob.token")
	if err := writeFile(bobFile, "  bob-secret\n\n"); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, `
agents:
  - { id: desktop, token_env: AGENT_TOKEN, on_behalf_of: alice, tenant: acme, groups: [bots] }
approvers:
  - { id: alice, token_sha256: `+strings.ToUpper(sha)+`, roles: [approver], groups: [ops], tenant: acme }
  - { id: bob, token_file: `+bobFile+`, roles: [admin] }
`, nil)
	got, err := cfg.Tokens(MapEnv(map[string]string{"AGENT_TOKEN": "agent-secret"}), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Credential{
		TokenHash("agent-secret"): {Principal: approval.Principal{ID: "desktop", Kind: "agent", Tenant: "acme", Groups: []string{"bots"}, OnBehalfOf: "alice"}},
		sha:                       {Principal: approval.Principal{ID: "alice", Kind: "human", Tenant: "acme", Groups: []string{"ops"}}, Roles: []string{"approver"}},
		TokenHash("bob-secret"):   {Principal: approval.Principal{ID: "bob", Kind: "human"}, Roles: []string{"admin"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tokens (-want +got):\n%s", diff)
	}
}

func TestTokensErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := writeFile(empty, " \n"); err != nil {
		t.Fatal(err)
	}
	same := filepath.Join(dir, "same")
	if err := writeFile(same, "test\n"); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Agents: []Agent{
			{ID: "a1", Token: Token{TokenEnv: "UNSET"}},
			{ID: "a2", Token: Token{TokenEnv: "EMPTY"}},
			{ID: "a3", Token: Token{TokenFile: filepath.Join(dir, "missing")}},
			{ID: "a4", Token: Token{TokenFile: empty}},
			{ID: "a5", Token: Token{TokenEnv: "SECRET"}},
		},
		Approvers: []Approver{
			{ID: "h1", Token: Token{TokenSHA256: sha}, Roles: []string{"admin"}},
			{ID: "h2", Token: Token{TokenFile: same}, Roles: []string{"admin"}},
			{ID: "h3", Token: Token{}, Roles: []string{"admin"}},
			{ID: "h4", Token: Token{TokenSHA256: "short"}, Roles: []string{"admin"}},
		},
	}
	got, err := cfg.Tokens(MapEnv(map[string]string{"EMPTY": "", "SECRET": "hunter2"}), os.ReadFile)
	if got != nil {
		t.Errorf("Tokens returned a map with an error")
	}
	want := []string{
		`agents[0] "a1": token_env UNSET is not set`,
		`agents[1] "a2": token_env EMPTY is empty`,
		`agents[2] "a3": token_file ` + filepath.Join(dir, "missing"),
		`agents[3] "a4": token_file ` + empty + ` is empty`,
		`approvers[1] "h2": same token as approvers[0] "h1"`,
		`approvers[2] "h3": set exactly one`,
		`approvers[3] "h4": token_sha256: want 64 hex digits`,
	}
	lines := Lines(err)
	if len(lines) != len(want) {
		t.Fatalf("errors:\n%s\nwant %d", strings.Join(lines, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], want[i])
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing token file does not wrap fs.ErrNotExist")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("errors leak a token: %v", err)
	}
}

func TestStdioPrincipal(t *testing.T) {
	agents := []Agent{{ID: "first", OnBehalfOf: "alice"}, {ID: "second", Tenant: "t"}}
	cases := []struct {
		name string
		cfg  Config
		want approval.Principal
	}{
		{"built-in", Config{}, approval.Principal{ID: "stdio", Kind: "agent"}},
		{"first agent", Config{Agents: agents}, approval.Principal{ID: "first", Kind: "agent", OnBehalfOf: "alice"}},
		{"named agent", Config{Agents: agents, Stdio: Stdio{Agent: "second"}}, approval.Principal{ID: "second", Kind: "agent", Tenant: "t"}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, c.cfg.StdioPrincipal()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
