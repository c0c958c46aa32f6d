package cli_test

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

const cliPolicyV1 = `default: allow
approval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}
rules:
  - {name: no-delete, server: fs, tools: [delete_*], effect: deny}
`

// policyAPI serves the admin API over a real store whose policy revision 1
// is cliPolicyV1; root and ada are admins.
func policyAPI(t *testing.T) string {
	t.Helper()
	db := sqlitetest.Open(t)
	p1, err := policystore.Parse([]byte(cliPolicyV1))
	if err != nil {
		t.Fatal(err)
	}
	holder := policy.NewHolder(p1)
	svc := policystore.New(db, &policystore.Options{Install: func(_ store.PolicyRevision, p *policy.Policy) { holder.Store(p) }})
	if _, err := svc.Bootstrap(t.Context(), p1, "config"); err != nil {
		t.Fatal(err)
	}
	auth := func(tok string) (approval.Principal, []string, bool) {
		switch tok {
		case "root-tok":
			return approval.Principal{ID: "root", Kind: "human"}, []string{api.RoleAdmin}, true
		case "ada-tok":
			return approval.Principal{ID: "ada", Kind: "human"}, []string{api.RoleAdmin}, true
		}
		return approval.Principal{}, nil, false
	}
	srv := httptest.NewServer(api.New(gate.New(db, holder, nil), auth, &api.Options{Policies: svc}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runPolicy(t *testing.T, addr, token string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.RunPolicy(t.Context(), args, &out, &errOut, addrTokenEnv(addr, token))
	return code, out.String(), errOut.String()
}

// addrTokenEnv is an environment with only TOOLGATE_ADDR and TOOLGATE_TOKEN.
func addrTokenEnv(addr, token string) func(string) string {
	return func(k string) string {
		switch k {
		case cli.EnvAddr:
			return addr
		case cli.EnvToken:
			return token
		}
		return ""
	}
}

func TestPolicyCommands(t *testing.T) {
	addr := policyAPI(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A config file's policy: key is what is proposed.
	narrow := write("narrow.yaml", "listen: {admin: 127.0.0.1:0}\npolicy:\n"+indent(cliPolicyV1+"  - {name: no-exec, server: sh, effect: deny}\n"))
	wide := write("wide.yaml", "default: allow\napproval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}\n")

	tests := []struct {
		name   string
		token  string
		args   []string
		code   int
		stdout []string // substrings
		stderr string
	}{
		{"show current", "root-tok", []string{"show"}, 0, []string{"revision:   1\n", "created:", "by config", "no-delete"}, ""},
		{"narrowing applies", "root-tok", []string{"propose", narrow}, 0, []string{"applied: revision 2", "no-exec"}, ""},
		{"stale base", "root-tok", []string{"propose", "--base", "1", wide}, 1, nil, "409 policy_moved"},
		{"widening needs approval", "root-tok", []string{"propose", wide}, 0, []string{"approval required: ", "toolgate approvals approve "}, ""},
		{"show revision 2", "ada-tok", []string{"show", "--revision", "2"}, 0, []string{"revision:   2\n", "by root"}, ""},
		{"diff", "ada-tok", []string{"diff", "1", "2", "--json"}, 0, []string{`"from":1`, `"to":2`}, ""},
		{"diff same", "ada-tok", []string{"diff", "2", "2"}, 0, []string{"decide alike"}, ""},
		{"missing revision", "ada-tok", []string{"show", "--revision", "9"}, 1, nil, "404 not_found"},
		{"diff needs numbers", "ada-tok", []string{"diff", "1", "x"}, 2, nil, "want two revision numbers"},
		{"propose needs a file", "ada-tok", []string{"propose"}, 2, nil, "usage: toolgate policy propose FILE"},
		{"unknown command", "ada-tok", []string{"frob"}, 2, nil, `unknown command "frob"`},
		{"no token", "", []string{"show"}, 2, nil, "no token"},
		{"missing file", "ada-tok", []string{"propose", filepath.Join(dir, "nope.yaml")}, 1, nil, "nope.yaml"},
	}
	for _, tc := range tests {
		code, stdout, stderr := runPolicy(t, addr, tc.token, tc.args...)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, stdout, stderr)
			continue
		}
		for _, s := range tc.stdout {
			if !strings.Contains(stdout, s) {
				t.Errorf("%s: stdout lacks %q:\n%s", tc.name, s, stdout)
			}
		}
		if !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: stderr lacks %q:\n%s", tc.name, tc.stderr, stderr)
		}
	}
}

// indent indents every line of s by two spaces.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestApprovePolicyChangeSaysApplied: approving a widening proposal applies
// it in the approve request itself; the approve command says so and names
// the new revision (it said "approved and dispatched; no outcome recorded
// yet", the words of a tool call, though nothing is dispatched).
func TestApprovePolicyChangeSaysApplied(t *testing.T) {
	addr := policyAPI(t)
	wide := filepath.Join(t.TempDir(), "wide.yaml")
	if err := os.WriteFile(wide, []byte("default: allow\napproval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPolicy(t, addr, "root-tok", "propose", wide)
	id, _, _ := strings.Cut(strings.TrimPrefix(stdout, "approval required: "), "\n")
	if code != 0 || !strings.HasPrefix(stdout, "approval required: ") {
		t.Fatalf("propose: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var out, errOut bytes.Buffer
	if code := cli.Run(t.Context(), []string{"approve", id}, &out, &errOut, addrTokenEnv(addr, "ada-tok")); code != 0 {
		t.Fatalf("approve: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	const want = "now approved (decided by ada) and applied: the deployment policy is revision 2"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "dispatched") {
		t.Errorf("approve said:\n%s\nwant it to contain %q (and not \"dispatched\")", out.String(), want)
	}
	out.Reset()
	if code := cli.Run(t.Context(), []string{"show", id}, &out, &errOut, addrTokenEnv(addr, "ada-tok")); code != 0 {
		t.Fatalf("show: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), ", as deployment policy revision 2\n") || strings.Contains(out.String(), "Dispatched") {
		t.Errorf("show printed:\n%s\nwant an Applied line naming revision 2, no Dispatched line", out.String())
	}
}
