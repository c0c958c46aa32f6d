package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/privfile"
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
	// Each problem a new user meets first names its fix, not only the fault.
	for i, fix := range map[int]string{
		0: "export it in toolgate's environment",
		1: "set it to the token",
		2: "correct the path, or create the file holding the secret (mode 0600)",
		3: "write the token into it",
	} {
		if !strings.Contains(lines[i], fix) {
			t.Errorf("error %d = %q, want the fix %q", i, lines[i], fix)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("errors leak a token: %v", err)
	}
}

// privateProblems are the problems Tokens and NotifySecrets find in cfg's
// files read by ReadFiles for the service user euid (no variables set).
func privateProblems(cfg Config, euid int) error {
	files := cfg.ReadFiles(privfile.Reader{Euid: euid}, os.ReadFile)
	_, terr := cfg.Tokens(nil, files.ReadFile)
	_, nerr := cfg.NotifySecrets(nil, files.ReadFile)
	return errors.Join(terr, nerr)
}

// TestPrivateTokenFiles: an approver's token file is read only if it is a
// regular file of the service user without group or other bits, and its
// problem is said once, naming the approver and the file.
func TestPrivateTokenFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := writeFile(p, "secret\n"); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := file("private", 0o600)
	readOnly := file("read-only", 0o400)
	groupRead := file("group-read", 0o640)
	worldRead := file("world-read", 0o604)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	euid := os.Geteuid()
	tests := []struct {
		name string
		file string
		euid int
		want string // the error; "" for nil
	}{
		{name: "0600", file: private, euid: euid},
		{name: "0400", file: readOnly, euid: euid},
		{name: "group bits", file: groupRead, euid: euid, want: `approvers[0] "bob": token_file ` + groupRead + ` has mode 0640; want 0600 (no group or other bits)`},
		{name: "other bits", file: worldRead, euid: euid, want: `approvers[0] "bob": token_file ` + worldRead + ` has mode 0604; want 0600 (no group or other bits)`},
		{name: "symlink to a private file", file: link, euid: euid, want: `approvers[0] "bob": token_file ` + link + ` is a symlink; want a regular file`},
		{name: "directory", file: dir, euid: euid, want: `approvers[0] "bob": token_file ` + dir + ` is not a regular file`},
		{name: "missing", file: filepath.Join(dir, "missing"), euid: euid, want: `approvers[0] "bob": token_file ` + filepath.Join(dir, "missing") + `: no such file or directory` + missingFileFix},
		{name: "other owner", file: private, euid: euid + 1, want: fmt.Sprintf(`approvers[0] "bob": token_file %s is owned by uid %d; want %d (the service user)`, private, euid, euid+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Approvers: []Approver{{ID: "bob", Token: Token{TokenFile: tt.file}}}}
			err := privateProblems(cfg, tt.euid)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("problems = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrivateTokenFilesApproversOnly(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "agent.token")
	if err := os.WriteFile(shared, []byte("agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad1 := filepath.Join(dir, "h1.token")
	if err := os.WriteFile(bad1, []byte("h1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Agents: []Agent{{ID: "a1", Token: Token{TokenFile: shared}}},
		Approvers: []Approver{
			{ID: "h0", Token: Token{TokenSHA256: sha}},
			{ID: "h1", Token: Token{TokenFile: bad1}},
			{ID: "h2", Token: Token{TokenFile: filepath.Join(dir, "absent")}},
		},
	}
	want := []string{
		`approvers[1] "h1": token_file ` + bad1 + ` has mode 0644; want 0600 (no group or other bits)`,
		`approvers[2] "h2": token_file ` + filepath.Join(dir, "absent") + `: no such file or directory` + missingFileFix,
	}
	if diff := cmp.Diff(want, Lines(privateProblems(cfg, os.Geteuid()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
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

// TestShortTokens: a token from token_env or token_file under
// MinTokenChars characters is a warning naming the principal, the source
// and the length, never the token; long tokens, token_sha256 and tokens
// that cannot be read (Tokens' errors) are not.
func TestShortTokens(t *testing.T) {
	dir := t.TempDir()
	shortFile := filepath.Join(dir, "short.token")
	if err := writeFile(shortFile, "  pass1234\n"); err != nil {
		t.Fatal(err)
	}
	longFile := filepath.Join(dir, "long.token")
	if err := writeFile(longFile, "0123456789abcdef\n"); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, `
agents:
  - { id: short-env, token_env: SHORT }
  - { id: long-env, token_env: LONG }
  - { id: unset-env, token_env: UNSET }
  - { id: hashed, token_sha256: `+sha+` }
approvers:
  - { id: short-file, token_file: `+shortFile+`, roles: [approver] }
  - { id: long-file, token_file: `+longFile+`, roles: [approver] }
  - { id: missing-file, token_file: `+filepath.Join(dir, "missing")+`, roles: [approver] }
`, nil)
	got := cfg.ShortTokens(MapEnv(map[string]string{"SHORT": "hunter2", "LONG": "a-token-of-20-chars!"}), os.ReadFile)
	want := []string{
		`agents[0] "short-env": the token of token_env SHORT is 7 characters long; a bearer token under 16 characters can be guessed: use a random one (openssl rand -hex 16 makes 32)`,
		`approvers[0] "short-file": the token of token_file ` + shortFile + ` is 8 characters long; a bearer token under 16 characters can be guessed: use a random one (openssl rand -hex 16 makes 32)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ShortTokens (-want +got):\n%s", diff)
	}
	for _, w := range got {
		if strings.Contains(w, "hunter2") || strings.Contains(w, "pass1234") {
			t.Errorf("warning %q carries the token", w)
		}
	}
}
