package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainAndPolicyTestReadEnvAddr: with neither --config nor --addr
// (and no config: key in a cases file), `policy explain` and `policy
// test` ask the admin API at $TOOLGATE_ADDR, as the other admin commands
// do; without it they say what to give. (The live answer through
// $TOOLGATE_ADDR: e2e TestPolicyExplainAndTestCLI.)
func TestExplainAndPolicyTestReadEnvAddr(t *testing.T) {
	cases := filepath.Join(t.TempDir(), "cases.yaml")
	if err := os.WriteFile(cases, []byte("cases:\n  - {name: one, server: s, tool: t, expect: allow}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := map[string]func(env map[string]string) (int, string){
		"explain": func(env map[string]string) (int, string) {
			var out, errb bytes.Buffer
			code := RunExplain(t.Context(), []string{"--server", "s", "--tool", "t"}, &out, &errb, lookupOf(env))
			return code, errb.String()
		},
		"test": func(env map[string]string) (int, string) {
			var out, errb bytes.Buffer
			code := RunPolicyTest(t.Context(), []string{cases}, &out, &errb, lookupOf(env))
			return code, errb.String()
		},
	}
	for name, f := range run {
		if code, msg := f(nil); code != ExitUsage || !strings.Contains(msg, "$"+EnvAddr) {
			t.Errorf("%s without a policy source: exit %d %q, want %d naming $%s", name, code, msg, ExitUsage, EnvAddr)
		}
		// Nothing listens at port 1: the command tried the address.
		env := map[string]string{EnvAddr: "http://127.0.0.1:1", EnvToken: "tok"}
		if code, msg := f(env); code != ExitFailure || !strings.Contains(msg, "127.0.0.1:1") {
			t.Errorf("%s with $%s: exit %d %q, want %d naming the address", name, EnvAddr, code, msg, ExitFailure)
		}
	}
}

// lookupOf is a config.Env over env.
func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
